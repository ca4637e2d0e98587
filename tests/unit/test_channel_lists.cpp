// Lists of feature maps that only channel concatenations read (tspass::channelListsChannelsLast)
// on the DenseNet-like sample frozen, its convolutions' regions packed channels-last: both dense
// blocks' lists become channels-last (no exit conversion into them left), the outputs within
// float rounding of the original's; a list whose concatenation is read by a view (whose result
// depends on the layout) stays as it is.
#include <algorithm>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;

using xalloc::testing::runGraph;

namespace {

// Row-major conversions whose result goes into a list.
std::size_t exitsIntoLists(const torch::jit::Graph& g) {
  std::size_t n = 0;
  for (const torch::jit::Node* c : g.nodes())
    if (isRowMajorContiguousCall(c))
      for (const auto& u : c->output()->uses())
        n += u.user->kind() == c10::prim::ListConstruct ||
             u.user->kind() == c10::Symbol::fromQualString("aten::append");
  return n;
}

} // namespace

TEST(ChannelLists, DenseBlocksListsStayChannelsLast) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  xalloc::testing::Frozen f = xalloc::testing::packedSample("densenet");
  const c10::IValue before = runGraph(f.graph, f.inputs);
  ASSERT_GT(exitsIntoLists(*f.graph), 0u) << "the regions convert their outputs for the lists";
  EXPECT_EQ(channelListsChannelsLast(*f.graph), 2) << "both dense blocks";
  EXPECT_EQ(exitsIntoLists(*f.graph), 0u);
  const c10::IValue after = runGraph(f.graph, f.inputs);
  EXPECT_LE(maxRelativeError(before, after), 1e-5);
  const std::string text = graphText(*f.graph);
  EXPECT_EQ(channelListsChannelsLast(*f.graph), 2) << "found again";
  EXPECT_EQ(graphText(*f.graph), text) << "nothing more to change";
}

TEST(ChannelLists, AListWhoseConcatenationIsViewedStays) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  xalloc::testing::Frozen f = xalloc::testing::packedSample("densenet");
  // A view of the first concatenation: its result would differ for a channels-last input.
  torch::jit::Node* cat = nullptr;
  for (torch::jit::Node* n : f.graph->nodes())
    if (n->kind() == c10::aten::cat && !cat)
      cat = n;
  ASSERT_NE(cat, nullptr);
  torch::jit::WithInsertPoint guard(cat->next());
  torch::jit::Value* sizes = f.graph->insertConstant(std::vector<std::int64_t>{-1});
  torch::jit::Node* view = f.graph->create(c10::aten::view, {cat->output(), sizes});
  view->insertAfter(cat);
  const std::size_t exits = exitsIntoLists(*f.graph);
  EXPECT_EQ(channelListsChannelsLast(*f.graph), 1) << "the second block's list only";
  EXPECT_LT(exitsIntoLists(*f.graph), exits);
  EXPECT_GT(exitsIntoLists(*f.graph), 0u) << "the first block's exits stay";
}

TEST(ChannelLists, XprofSeesTheConcatenationsThatComeChannelsLast) {
  // What xprof asks of a region's entry before it times the fast form's channels-last candidates
  // with that entry channels-last: every concatenation of both dense blocks' lists.
  xalloc::testing::Frozen f = xalloc::testing::frozenSample("densenet");
  std::size_t cats = 0, seen = 0;
  for (torch::jit::Node* n : f.graph->nodes())
    if (n->kind() == c10::aten::cat) {
      ++cats;
      seen += concatenatesChannelsLastList(n->output());
    }
  EXPECT_EQ(cats, 7u) << "3 + 1 in the first block, 2 + 1 in the second";
  EXPECT_EQ(seen, cats);
  EXPECT_FALSE(concatenatesChannelsLastList(f.graph->inputs()[1]));
}

TEST(ChannelLists, FreezingFoldsTheNormsBehindRankChecks) {
  // BatchNorm2d's rank check read the convolution's output too, and torch.jit.freeze left each
  // dense layer's second norm unfolded; tspass::freezeModel points the check at the
  // convolution's input (the same rank) and folds it.
  auto normsAfterConvs = [](const torch::jit::Graph& g) {
    std::size_t n = 0;
    for (const torch::jit::Node* b : g.nodes())
      n += b->kind() == c10::aten::batch_norm && b->input(0)->node()->kind() == c10::aten::conv2d;
    return n;
  };
  const std::string path = std::string(XALLOC_SAMPLES_DIR) + "/densenet.pt";
  LoadedModel plain = loadModel(path);
  torch::jit::Module torchs = torch::jit::freeze(plain.module, c10::nullopt, true);
  EXPECT_EQ(normsAfterConvs(*torchs.get_method("forward").graph()), 5u) << "torch's own freeze";
  xalloc::testing::Frozen f = xalloc::testing::frozenSample("densenet", /*inlined=*/false);
  EXPECT_EQ(normsAfterConvs(*f.graph), 0u);
  // The same outputs as the model itself, and the check still there.
  LoadedModel original = loadModel(path);
  const c10::IValue want =
      original.module.forward(std::vector<c10::IValue>(f.inputs.begin() + 1, f.inputs.end()));
  const c10::IValue got =
      f.model.module.forward(std::vector<c10::IValue>(f.inputs.begin() + 1, f.inputs.end()));
  EXPECT_LE(maxRelativeError(want, got), 1e-5);
  EXPECT_NE(graphText(*f.graph).find("aten::dim"), std::string::npos);
}

// Channels-last is 4-D: a list of 3-D convolutions' outputs (S3D's inception branches) is left
// as it is, whether its parts' rank is unknown or known to be 5, where a list of 2-D ones is kept
// (ATen refuses a channels-last conversion of a 5-D tensor: the rewritten S3D failed to run).
TEST(ChannelLists, OnlyFourDListsAreKeptChannelsLast) {
  auto kept = [](const std::string& conv, const std::string& type) {
    auto g = std::make_shared<torch::jit::Graph>();
    torch::jit::parseIR(R"IR(
graph(%x : Tensor, %w : Tensor, %wl : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %a : )IR" + type + " = " + conv +
                            R"IR((%x, %w, %none, %s, %s, %s, %one)
  %b : )IR" + type + " = " + conv +
                            R"IR((%x, %w, %none, %s, %s, %s, %one)
  %l : Tensor[] = prim::ListConstruct(%a, %b)
  %c : Tensor = aten::cat(%l, %one)
  %r : Tensor = aten::linear(%c, %wl, %none)
  return (%r))IR",
                        g.get());
    return channelListsChannelsLast(*g);
  };
  EXPECT_EQ(kept("aten::conv2d", "Tensor"), 1);
  EXPECT_EQ(kept("aten::conv3d", "Tensor"), 0) << "no part shown to be 4-D";
  EXPECT_EQ(kept("aten::conv2d", "Float(1, 4, 5, 5, 5, strides=[500, 125, 25, 5, 1])"), 0)
      << "a part known to be 5-D";
}
