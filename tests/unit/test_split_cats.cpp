// tspass/src/layouts/split_cats.cpp: a convolution of a concatenation along the channels, in
// the packed layouts, runs one convolution per piece summed by the packed residual add; what
// must not be split is not (the FireNet sample's split: test_regions.cpp).
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;
using xalloc::testing::countNodes;
using xalloc::testing::frozenGraph;
using xalloc::testing::runGraph;

namespace {
// conv(cat) as SqueezeNet writes it: two expand convolutions concatenated, max pooled, read by
// the next squeeze convolution; and concatenations that must stay: one with a second reader, one
// whose piece is written in place after it, one with a piece too thin to convolve alone.
const char* kCatConvs = R"IR(
graph(%self : Tensor, %x : Tensor, %w0 : Tensor, %w1 : Tensor, %w2 : Tensor, %wb2 : Tensor,
      %w3 : Tensor, %w4 : Tensor, %w5 : Tensor, %w6 : Tensor, %w7 : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %true : bool = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %p0 : int[] = prim::ListConstruct(%zero, %zero)
  %k : int[] = prim::ListConstruct(%three, %three)
  %st : int[] = prim::ListConstruct(%two, %two)
  %sq : Tensor = aten::conv2d(%x, %w0, %none, %s, %s, %s, %one)
  %sqr : Tensor = aten::relu(%sq)
  %e1 : Tensor = aten::conv2d(%sqr, %w1, %none, %s, %p0, %s, %one)
  %e1r : Tensor = aten::relu_(%e1)
  %e3 : Tensor = aten::conv2d(%sqr, %w2, %wb2, %s, %s, %s, %one)
  %e3r : Tensor = aten::relu(%e3)
  %l1 : Tensor[] = prim::ListConstruct(%e1r, %e3r)
  %cat1 : Tensor = aten::cat(%l1, %one)
  %pool : Tensor = aten::max_pool2d(%cat1, %k, %st, %p0, %s, %true)
  %c2 : Tensor = aten::conv2d(%pool, %w3, %none, %s, %p0, %s, %one)
  %c2r : Tensor = aten::relu(%c2)
  %f1 : Tensor = aten::conv2d(%c2r, %w4, %none, %s, %p0, %s, %one)
  %f2 : Tensor = aten::conv2d(%c2r, %w4, %none, %s, %p0, %s, %one)
  %l2 : Tensor[] = prim::ListConstruct(%f1, %f2)
  %cat2 : Tensor = aten::cat(%l2, %one)
  %g1 : Tensor = aten::conv2d(%cat2, %w5, %none, %s, %p0, %s, %one)
  %h1 : Tensor = aten::conv2d(%c2r, %w4, %none, %s, %p0, %s, %one)
  %h2 : Tensor = aten::conv2d(%c2r, %w4, %none, %s, %p0, %s, %one)
  %l3 : Tensor[] = prim::ListConstruct(%h1, %h2)
  %cat3 : Tensor = aten::cat(%l3, %one)
  %h1w : Tensor = aten::relu_(%h1)
  %g2 : Tensor = aten::conv2d(%cat3, %w5, %none, %s, %p0, %s, %one)
  %t1 : Tensor = aten::conv2d(%c2r, %w6, %none, %s, %p0, %s, %one)
  %l4 : Tensor[] = prim::ListConstruct(%t1, %g2)
  %cat4 : Tensor = aten::cat(%l4, %one)
  %g3 : Tensor = aten::conv2d(%cat4, %w7, %none, %s, %p0, %s, %one)
  %sum1 : Tensor = aten::add(%g1, %g3, %one)
  %sum2 : Tensor = aten::add(%sum1, %cat2, %one)
  %out : (Tensor, Tensor) = prim::TupleConstruct(%sum2, %h1w)
  return (%out))IR";
} // namespace

// A convolution of a concatenation runs one convolution per piece, each with its slice of the
// weight, summed in the packed op's own pass (the pooling between runs per piece): SqueezeNet's
// Fire modules without their copy. The values stay within a reordered sum, and what must not be
// split is not.
TEST(SplitCats, AConvolutionOfAConcatenationRunsPerPiece) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "the runtime was built without oneDNN";
  at::manual_seed(5);
  auto g = frozenGraph(kCatConvs,
                       {at::randn({16, 8, 3, 3}).mul(0.2), at::randn({24, 16, 1, 1}).mul(0.3),
                        at::randn({32, 16, 3, 3}).mul(0.1), at::randn({32}),
                        at::randn({16, 56, 1, 1}).mul(0.2), at::randn({16, 16, 1, 1}).mul(0.3),
                        at::randn({32, 32, 1, 1}).mul(0.2), at::randn({4, 16, 1, 1}),
                        at::randn({32, 36, 1, 1}).mul(0.2)});
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 8, 23, 23})};
  const c10::IValue before = runGraph(g, in);
  auto regions = findLayoutRegions(*g, {4});
  ASSERT_EQ(regions.size(), 1u) << graphText(*g);
  for (const char* layout : {"channels_last+packed", "channels_last+packed+add"}) {
    SCOPED_TRACE(layout);
    auto h = g->copy();
    auto r = findLayoutRegions(*h, {4});
    ASSERT_EQ(r.size(), 1u);
    const RegionEdit e = applyRegionLayout(*h, r[0], *formats::parseCandidateName(layout));
    ASSERT_TRUE(e.applied) << e.message;
    h->lint();
    // cat1 split (through the pooling), now two poolings; cat2 (read by the sum too), cat3 (a
    // piece written after it) and cat4 (a 4-channel piece) stay.
    EXPECT_EQ(countNodes(*h, "aten::cat"), 3u) << graphText(*h);
    EXPECT_EQ(countNodes(*h, "xalloc::max_pool2d"), 2u) << graphText(*h);
    // The split's add; under +add the model's g1 + g3 too.
    const bool add = std::string(layout).find("+add") != std::string::npos;
    EXPECT_EQ(countNodes(*h, "xalloc::conv2d_packed_add"), add ? 2u : 1u) << graphText(*h);
    EXPECT_EQ(countNodes(*h, "aten::conv2d"), 0u) << graphText(*h);
    EXPECT_LE(maxRelativeError(before, runGraph(h, in)), 1e-4);
    // NaN in a piece comes out as ATen's relu after the sum gives it.
    std::vector<c10::IValue> nan = in;
    at::Tensor xn = in[1].toTensor().clone();
    xn[0][0][5][5] = std::numeric_limits<float>::quiet_NaN();
    nan[1] = xn;
    const at::Tensor want = runGraph(g, nan).toTupleRef().elements()[0].toTensor();
    const at::Tensor got = runGraph(h, nan).toTupleRef().elements()[0].toTensor();
    ASSERT_TRUE(want.isnan().any().item<bool>());
    EXPECT_TRUE(at::equal(want.isnan(), got.isnan()));
  }
}
