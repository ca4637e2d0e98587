// Channel shuffles after a channels-last region (tspass::shuffleChannelsInPlace) on the
// ShuffleCNN sample frozen: the first unit's shuffle, read by the next unit's chunk, becomes one
// xalloc::channel_shuffle of the region's value with its exit conversion gone, the outputs bit
// for bit the same, and the input's gradient too (ATen's channel_shuffle has none: the runtime's
// op takes the idiom's ops then); the second unit's, read by a permute, stays.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;

using xalloc::testing::countNodes;
using xalloc::testing::runGraph;

TEST(ChannelShuffle, AfterAChannelsLastRegionItIsOneOpOfTheRegionsValue) {
  xalloc::testing::Frozen f = xalloc::testing::frozenSample("shufflecnn");
  const c10::IValue original = runGraph(f.graph, f.inputs);
  // Nothing to drop before any region runs channels-last: no exit conversion, no rewrite.
  EXPECT_EQ(shuffleChannelsInPlace(*f.graph), 0);

  formats::RegionCandidate cl;
  cl.layout = formats::layoutTraits(formats::LayoutTarget::ChannelsLast, false);
  std::size_t regions = 0;
  for (LayoutRegion& r : findLayoutRegions(*f.graph, xalloc::testing::ranksOf(f)))
    if (r.rank == 4 && applyRegionLayout(*f.graph, r, cl).applied)
      ++regions;
  ASSERT_EQ(regions, 2u) << "one region per unit";
  const c10::IValue laid_out = runGraph(f.graph, f.inputs);
  const std::size_t views = countNodes(*f.graph, "aten::view");
  const std::size_t conversions = countNodes(*f.graph, "aten::contiguous");

  EXPECT_EQ(shuffleChannelsInPlace(*f.graph), 1) << "the first unit's; the second is permuted";
  EXPECT_EQ(countNodes(*f.graph, "xalloc::channel_shuffle"), 1u);
  EXPECT_EQ(countNodes(*f.graph, "aten::view"), views - 2);
  EXPECT_EQ(countNodes(*f.graph, "aten::contiguous"), conversions - 2)
      << "the region's exit conversion and the shuffle's copy";
  const c10::IValue shuffled = runGraph(f.graph, f.inputs);
  EXPECT_TRUE(bitwiseEqual({laid_out}, {shuffled}));
  EXPECT_LE(maxRelativeError(original, shuffled), 1e-5);
  // A second pass finds nothing more.
  EXPECT_EQ(shuffleChannelsInPlace(*f.graph), 0);
}

TEST(ChannelShuffle, TheRuntimesShuffleDifferentiatesAsTheIdiom) {
  const at::Tensor x = at::randn({2, 12, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast);
  auto idiom = [](const at::Tensor& t) {
    return t.view({2, 3, 4, 5, 5}).transpose(1, 2).contiguous().view({2, -1, 5, 5});
  };
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("xalloc::channel_shuffle", "");
  auto shuffle = [&](const at::Tensor& t) {
    return op.typed<at::Tensor(const at::Tensor&, std::int64_t)>().call(t, 3);
  };
  {
    c10::NoGradGuard no_grad;
    const at::Tensor y = shuffle(x);
    EXPECT_TRUE(at::equal(y, idiom(x)));
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast)) << "the region's layout kept";
  }
  const at::Tensor a = x.clone().requires_grad_(true), b = x.clone().requires_grad_(true);
  const at::Tensor w = at::randn({2, 12, 5, 5});
  (shuffle(a) * w).sum().backward();
  (idiom(b) * w).sum().backward();
  EXPECT_TRUE(at::equal(a.grad(), b.grad()));
  // What the idiom refuses is refused: channels the groups do not divide.
  c10::NoGradGuard no_grad;
  EXPECT_THROW(
      op.typed<at::Tensor(const at::Tensor&, std::int64_t)>().call(at::randn({1, 7, 2, 2}), 3),
      std::exception);
}

TEST(ChannelShuffle, TwoGroupsOfChannelsLastFloatsAreATensBitForBit) {
  // The runtime's own interleave of the halves: half counts below, at and past a register's
  // 16 (the masked tail), ShuffleNetV2's 58, 116 and 232; NaN payloads and signed zeros kept.
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("xalloc::channel_shuffle", "");
  auto shuffle = [&](const at::Tensor& t, std::int64_t g) {
    return op.typed<at::Tensor(const at::Tensor&, std::int64_t)>().call(t, g);
  };
  c10::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    for (std::int64_t c : {2, 4, 30, 32, 34, 62, 116, 232, 464})
      for (std::int64_t n : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << c << " channels, batch " << n << ", " << t);
        at::Tensor nhwc = at::randn({n, 7, 5, c});
        nhwc.view(-1)[1] = NAN;
        nhwc.view(-1)[2] = -0.f;
        const at::Tensor x = nhwc.permute({0, 3, 1, 2}); // channels-last
        const at::Tensor want = at::channel_shuffle(x, 2);
        const at::Tensor got = shuffle(x, 2);
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        EXPECT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt)));
      }
    // Other groups and layouts: ATen's op, as before.
    const at::Tensor nchw = at::randn({2, 12, 3, 3});
    EXPECT_TRUE(at::equal(shuffle(nchw, 2), at::channel_shuffle(nchw, 2)));
    const at::Tensor three = at::randn({2, 12, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_TRUE(at::equal(shuffle(three, 3), at::channel_shuffle(three, 3)));
  }
  at::set_num_threads(threads);
}
