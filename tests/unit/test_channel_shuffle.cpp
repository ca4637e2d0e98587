// Channel shuffles after a channels-last region (tspass::shuffleChannelsInPlace) on the
// ShuffleCNN sample frozen: the first unit's shuffle, read by the next unit's chunk, becomes one
// xalloc::channel_shuffle of the region's value with its exit conversion gone, the outputs bit
// for bit the same, and the input's gradient too (ATen's channel_shuffle has none: the runtime's
// op takes the idiom's ops then); the second unit's, read by a permute, stays.
#include <limits>
#include <tuple>

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

TEST(ChannelShuffle, AUnitsConcatenationShuffleAndTheNextChunkAreOneOp) {
  xalloc::testing::Frozen f = xalloc::testing::packedSample("shufflecnn");
  ASSERT_EQ(shuffleChannelsInPlace(*f.graph), 1);
  const c10::IValue shuffled = runGraph(f.graph, f.inputs);
  const std::size_t cats = countNodes(*f.graph, "aten::cat");

  // The first unit's end and the second's chunk: one op making both halves; the second unit's
  // concatenation, read by the idiom's view (its shuffle permuted after), stays.
  EXPECT_EQ(fuseCatShuffles(*f.graph), 1);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::cat_shuffle_chunk"), 1u);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::channel_shuffle"), 0u);
  EXPECT_EQ(countNodes(*f.graph, "aten::chunk"), 1u) << "the first unit's own";
  EXPECT_EQ(countNodes(*f.graph, "aten::cat"), cats - 1);
  EXPECT_TRUE(bitwiseEqual({shuffled}, {runGraph(f.graph, f.inputs)}));
  EXPECT_EQ(fuseCatShuffles(*f.graph), 0) << "a second pass finds nothing more";
}

TEST(ChannelShuffle, TheFusedUnitEndGivesTheOpsElementsForAnyInput) {
  c10::NoGradGuard no_grad;
  using Two = std::tuple<at::Tensor, at::Tensor>;
  auto& d = c10::Dispatcher::singleton();
  auto whole = d.findSchemaOrThrow("xalloc::cat_shuffle", "")
                   .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  auto halves = d.findSchemaOrThrow("xalloc::cat_shuffle_chunk", "")
                    .typed<Two(const at::Tensor&, const at::Tensor&)>();
  auto sameBits = [](const at::Tensor& x, const at::Tensor& y) { // NaN included
    return x.sizes() == y.sizes() && at::equal(x.view(at::kInt), y.view(at::kInt));
  };
  auto check = [&](const at::Tensor& a, const at::Tensor& b, const char* what) {
    const at::Tensor want = at::channel_shuffle(at::cat({a, b}, 1), 2);
    EXPECT_TRUE(sameBits(whole.call(a, b), want)) << what;
    const auto parts = want.chunk(2, 1);
    const auto [x1, x2] = halves.call(a, b);
    EXPECT_TRUE(sameBits(x1, parts[0])) << what;
    EXPECT_TRUE(sameBits(x2, parts[1])) << what;
  };
  const auto cl = at::MemoryFormat::ChannelsLast;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    // ShuffleNetV2's channels (58: whole vectors and a tail), a NaN and an infinity carried.
    at::Tensor prev = at::randn({2, 116, 9, 7}).contiguous(cl);
    prev.index_put_({1, 3, 2, 2}, std::numeric_limits<float>::quiet_NaN());
    prev.index_put_({0, 60, 8, 6}, -std::numeric_limits<float>::infinity());
    const at::Tensor a = prev.narrow(1, 0, 58); // a slice of the last shuffle's channels
    const at::Tensor b = at::randn({2, 58, 9, 7}).contiguous(cl);
    check(a, b, "a slice and a dense channels-last piece");
    check(a.contiguous(), b.contiguous(), "row-major pieces (the ops' path)");
    check(at::randn({1, 5, 3, 3}).contiguous(cl), at::randn({1, 5, 3, 3}).contiguous(cl),
          "an odd number of pairs: halves not made of pairs");
    check(at::randn({1, 4, 3, 3}).contiguous(cl), at::randn({1, 6, 3, 3}).contiguous(cl),
          "pieces of unequal channels");
  }
  at::set_num_threads(1);
  {
    // Pieces that want gradients take the ops: the idiom's gradients.
    c10::AutoGradMode grad(true);
    const at::Tensor a = at::randn({1, 8, 3, 3}).contiguous(cl).requires_grad_(true);
    const at::Tensor b = at::randn({1, 8, 3, 3}).requires_grad_(true);
    const at::Tensor a2 = a.detach().clone().requires_grad_(true);
    const at::Tensor b2 = b.detach().clone().requires_grad_(true);
    const at::Tensor w = at::randn({1, 8, 3, 3});
    const auto [x1, x2] = halves.call(a, b);
    ((x1 * w).sum() + (x2 * w * 2).sum()).backward();
    const auto parts = at::cat({a2, b2}, 1)
                           .view({1, 2, 8, 3, 3})
                           .transpose(1, 2)
                           .contiguous()
                           .view({1, 16, 3, 3})
                           .chunk(2, 1);
    ((parts[0] * w).sum() + (parts[1] * w * 2).sum()).backward();
    EXPECT_TRUE(at::equal(a.grad(), a2.grad()));
    EXPECT_TRUE(at::equal(b.grad(), b2.grad()));
  }
  // The ops refuse what they refuse: pieces of other sizes.
  EXPECT_THROW(whole.call(at::randn({1, 4, 3, 3}), at::randn({1, 4, 2, 3})), std::exception);
}
