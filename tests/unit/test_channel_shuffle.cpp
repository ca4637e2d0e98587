// Channel shuffles after a channels-last region (tspass::shuffleChannelsInPlace) on the
// ShuffleCNN sample frozen: the first unit's shuffle, read by the next unit's chunk, becomes one
// xalloc::channel_shuffle of the region's value with its exit conversion gone, the outputs bit
// for bit the same, and the input's gradient too (ATen's channel_shuffle has none: the runtime's
// op takes the idiom's ops then); the second unit's, read by a permute, stays.
#include <ATen/ATen.h>
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

TEST(ChannelShuffle, TheShuffleAndTheChunkAreABorderBetweenTwoRegions) {
  xalloc::testing::Frozen f = xalloc::testing::frozenSample("shufflecnn");
  const auto regions = findLayoutRegions(*f.graph, xalloc::testing::ranksOf(f));
  std::vector<std::size_t> units;
  for (std::size_t i = 0; i < regions.size(); ++i)
    if (regions[i].rank == 4)
      units.push_back(i);
  ASSERT_EQ(units.size(), 2u);
  const auto borders = regionBorders(regions);
  ASSERT_EQ(borders.size(), regions.size());
  // The first unit's exit reaches the second through the shuffle's views, its copy, the chunk
  // and its unpacking; the second's is permuted (computed on in another order) before the
  // linear reads it: no border.
  using Feed = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(borders[units[0]], (std::vector<Feed>{{0, units[1]}}));
  EXPECT_TRUE(borders[units[1]].empty());
}
