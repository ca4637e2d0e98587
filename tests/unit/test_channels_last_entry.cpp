// NCHW inputs made channels-last by the runtime's kernels (runtime/src/channels_last.h) and the
// fast form's entries the packed convolutions convert themselves (tspass::
// packedConvsConvertEntries): ATen's values bit for bit and its rules (the input itself when it
// is channels-last already, ATen's own copy for what the kernels do not take), and on a sample
// the model's input handed to its first packed convolution as it is.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>

#include "../../runtime/src/channels_last.h"
#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;
using xalloc::runtime::toChannelsLast;
using xalloc::testing::countNodes;
using xalloc::testing::runGraph;

namespace {

void expectATens(const at::Tensor& x) {
  SCOPED_TRACE(::testing::PrintToString(x.sizes()));
  const at::Tensor want = x.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor got = toChannelsLast(x);
  EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(got.sizes(), x.sizes());
  EXPECT_EQ(got.scalar_type(), x.scalar_type());
  // Bit for bit, NaN payloads and signed zeros included.
  if (x.scalar_type() == at::kFloat) {
    EXPECT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt)));
  } else {
    EXPECT_TRUE(at::equal(got, want));
  }
}

} // namespace

TEST(ToChannelsLast, ATensValuesForEveryChannelCountAndTail) {
  at::manual_seed(3);
  // Three channels (the interleave: pixel counts with and without a tail of 16), sixteen and
  // more (the transpose), and the counts between (ATen's own copy); batches of 1 to 3.
  for (std::int64_t c : {3, 5, 16, 24, 58})
    for (std::int64_t n : {1, 3})
      for (auto hw : {std::pair<std::int64_t, std::int64_t>{224, 224}, {7, 9}, {1, 5}, {65, 65}}) {
        at::Tensor x = at::randn({n, c, hw.first, hw.second});
        x.view(-1)[0] = NAN;
        x.view(-1)[x.numel() - 1] = -0.f;
        expectATens(x);
      }
  // Split between threads.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  expectATens(at::randn({4, 3, 300, 200}));
  expectATens(at::randn({4, 64, 40, 40}));
  at::set_num_threads(threads);
}

TEST(ToChannelsLast, ATensRulesForWhatTheKernelsDoNotTake) {
  // Channels-last already: the input itself, as aten::contiguous returns it.
  const at::Tensor cl = at::randn({2, 3, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(toChannelsLast(cl).is_same(cl));
  // A strided view, another dtype, an empty batch, another rank.
  expectATens(at::randn({2, 6, 9, 9}).slice(1, 0, 3));
  expectATens(at::randn({2, 3, 9, 9}, at::kDouble));
  expectATens(at::randn({0, 3, 9, 9}));
  expectATens(at::randn({0, 32, 9, 9}));
  EXPECT_THROW(toChannelsLast(at::ones({3, 9, 9})), c10::Error) << "ATen's error: not 4-D";
  // Gradients: ATen's conversion, recorded.
  const at::Tensor g = at::randn({1, 3, 8, 8}).requires_grad_(true);
  const at::Tensor y = toChannelsLast(g);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(at::equal(g.grad(), at::ones_like(g)));
}

TEST(PackedEntries, TheModelsInputGoesToItsFirstPackedConvolutionAsItIs) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  xalloc::testing::Frozen f = xalloc::testing::frozenSample("densenet");
  formats::RegionCandidate packed;
  packed.layout = formats::layoutTraits(formats::LayoutTarget::ChannelsLast, true);
  for (LayoutRegion& r : findLayoutRegions(*f.graph, xalloc::testing::ranksOf(f)))
    if (r.rank == 4) {
      ASSERT_TRUE(applyRegionLayout(*f.graph, r, packed).applied);
    }
  const c10::IValue before = runGraph(f.graph, f.inputs);
  const std::size_t conversions = countNodes(*f.graph, "aten::contiguous");
  torch::jit::Value* input = f.graph->inputs().at(1);
  auto readByPackedConv = [&] {
    for (const auto& u : input->uses())
      if (u.user->kind().toQualString() == std::string("xalloc::conv2d_packed"))
        return true;
    return false;
  };
  ASSERT_FALSE(readByPackedConv()) << "the region's entry converts the input first";

  const std::int64_t dropped = packedConvsConvertEntries(*f.graph);
  EXPECT_GE(dropped, 1);
  EXPECT_EQ(countNodes(*f.graph, "aten::contiguous"), conversions - dropped);
  EXPECT_TRUE(readByPackedConv());
  const c10::IValue after = runGraph(f.graph, f.inputs);
  EXPECT_TRUE(bitwiseEqual({before}, {after}));
  EXPECT_EQ(packedConvsConvertEntries(*f.graph), 0) << "nothing more";
}
