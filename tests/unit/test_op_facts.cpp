// The op facts table (formats/op_facts.h): each kind once, and the questions the profiler, the
// scheduler and the rewriter ask answered from it consistently.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "xalloc/formats/layout_traits.h"
#include "xalloc/formats/op_facts.h"

using namespace xalloc::formats;

TEST(OpFacts, EachKindOnceAndInPlaceVariantsShareTheirRow) {
  std::set<std::string> kinds;
  for (const OpFacts& f : opFactsTable()) {
    EXPECT_TRUE(kinds.insert(f.kind).second) << f.kind << " has two rows";
    EXPECT_FALSE(isInPlaceKind(f.kind)) << f.kind << ": rows are out-of-place kinds";
    // A row is metadata, a view, or of a family, not two of them.
    EXPECT_LE(int(!f.reads_elements) + int(f.is_view) + int(f.family != OpFamily::None), 1)
        << f.kind;
    if (*f.blocked_form) {
      EXPECT_TRUE(f.mkldnn) << f.kind << ": a blocked form replaces an MKLDNN op";
    }
  }
  ASSERT_NE(opFacts("aten::relu_"), nullptr);
  EXPECT_EQ(opFacts("aten::relu_"), opFacts("aten::relu"));
  EXPECT_STREQ(opFacts("aten::hardswish_")->blocked_form, "xalloc::blocked_hardswish");
  EXPECT_EQ(opFacts("aten::no_such_op"), nullptr);
  EXPECT_FALSE(isInPlaceKind("aten::__is__"));
}

TEST(OpFacts, MetadataQuestionsAgree) {
  // Layout-free metadata reads no elements; strides and identity are metadata a conversion
  // changes, so they are not layout-free.
  for (const char* k : {"aten::size", "aten::dim", "aten::numel", "prim::dtype", "prim::device",
                        "aten::len", "prim::shape", "prim::requires_grad"}) {
    EXPECT_TRUE(readsOnlyLayoutFreeMetadata(k)) << k;
    EXPECT_TRUE(readsNoElements(k)) << k;
  }
  for (const char* k : {"aten::stride", "aten::is_contiguous", "aten::__is__"}) {
    EXPECT_FALSE(readsOnlyLayoutFreeMetadata(k)) << k;
    EXPECT_TRUE(readsNoElements(k)) << k;
  }
  for (const char* k : {"aten::relu", "aten::conv2d", "aten::view", "aten::unknown"}) {
    EXPECT_FALSE(readsNoElements(k)) << k;
    EXPECT_FALSE(readsOnlyLayoutFreeMetadata(k)) << k;
  }
  EXPECT_TRUE(isViewOp("aten::transpose"));
  EXPECT_FALSE(isViewOp("aten::squeeze_")); // changes its own tensor, returns no new view
  EXPECT_FALSE(isViewOp("aten::contiguous"));
}

TEST(OpFacts, EveryFusibleActivationIsOneThePackedOpsKnow) {
  const std::set<std::string> post_ops = {"relu",        "relu6",   "silu", "hardswish",
                                          "hardsigmoid", "sigmoid", "tanh", "gelu"};
  for (const OpFacts& f : opFactsTable())
    if (*f.fusible) {
      EXPECT_EQ(f.family, OpFamily::Unary) << f.kind;
      EXPECT_TRUE(post_ops.count(f.fusible)) << f.kind << " fuses as " << f.fusible;
    }
}

TEST(LayoutTraits, NamesAndRowsAgree) {
  std::set<std::string> names;
  for (const LayoutTraits& t : regionLayoutTraits()) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    EXPECT_EQ(layoutTraits(t.name), &t);
    // The pair older documents named a layout by leads to the first row of that pair.
    const LayoutTraits* by_pair = layoutTraits(t.target, t.packed);
    ASSERT_NE(by_pair, nullptr) << t.name;
    EXPECT_LE(by_pair, &t) << t.name;
    EXPECT_EQ(by_pair->target, t.target);
    EXPECT_EQ(by_pair->packed, t.packed);
    EXPECT_FALSE(t.ranks.empty()) << t.name;
    if (t.needs_onednn) {
      EXPECT_TRUE(t.needs_runtime) << t.name;
    }
  }
  EXPECT_EQ(layoutTraits(LayoutTarget::Blocked, true), nullptr);
  EXPECT_EQ(layoutTraits("no-such-layout"), nullptr);
}
