// A frozen model specialized to its inputs' ranks (tspass/specialize.h): a segmenter's backbone
// handing its features to the head through a dict, and its upsampling in F.interpolate's branch
// on the rank, are one region after it, computing the same values; a dict something else may
// change, and a rank not known, are left as they are.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/jit.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/specialize.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;
using xalloc::testing::countNodes;
using xalloc::testing::frozenGraph;
using xalloc::testing::runGraph;

namespace {

// torchvision's segmentation models as they freeze: IntermediateLayerGetter's dict between the
// backbone and the head, F.interpolate's `if input.dim() == 4` around the upsampling, then a
// classifier; `extra` is spliced in before the dict is read.
std::shared_ptr<torch::jit::Graph> segmenter(const std::string& extra = "") {
  const std::string source = R"PY(
def forward(self: Tensor, x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor):
    c1 = torch.conv2d(x, w1, None, [1, 1], [1, 1], [1, 1], 1)
    r1 = torch.relu(c1)
    features: Dict[str, Tensor] = {}
    features["out"] = r1
)PY" + extra + R"PY(
    high = features["out"]
    c2 = torch.conv2d(high, w2, None, [1, 1], [0, 0], [1, 1], 1)
    h = x.size(2)
    if c2.dim() == 4:
        up = torch.upsample_bilinear2d(c2, [h, h], False, None)
    else:
        up = torch.upsample_linear1d(c2, [h], False, None)
    c3 = torch.conv2d(up, w3, None, [1, 1], [0, 0], [1, 1], 1)
    return c3 + up
)PY";
  auto cu = torch::jit::compile(source);
  return frozenGraph(torch::jit::toGraphFunction(cu->get_function("forward")).graph()->copy(),
                     {at::randn({8, 4, 3, 3}), at::randn({8, 8, 1, 1}), at::randn({8, 8, 1, 1})});
}

std::size_t convolutions(const std::vector<LayoutRegion>& regions) {
  std::size_t n = 0;
  for (const LayoutRegion& r : regions)
    n = std::max<std::size_t>(n, static_cast<std::size_t>(r.convolutions));
  return n;
}

} // namespace

TEST(Specialize, ASegmentersBackboneAndHeadAreOneRegion) {
  auto g = segmenter();
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 4, 12, 12})};
  const c10::IValue before = runGraph(g, in);
  // Cut at the dict and at the branch: no region holds more than one convolution.
  EXPECT_EQ(convolutions(findLayoutRegions(*g, {4})), 1u) << graphText(*g);

  const Specialized s = specializeGraph(g, {4});
  g->lint();
  EXPECT_EQ(s.dict_reads, 1);
  EXPECT_EQ(s.rank_reads, 1);
  EXPECT_EQ(countNodes(*g, "prim::If"), 0u) << graphText(*g);
  EXPECT_EQ(countNodes(*g, "aten::upsample_bilinear2d"), 1u); // now at the top level
  EXPECT_EQ(countNodes(*g, "aten::__getitem__"), 0u);
  auto regions = findLayoutRegions(*g, {4});
  ASSERT_EQ(regions.size(), 1u) << graphText(*g);
  EXPECT_EQ(regions[0].convolutions, 3);
  EXPECT_TRUE(regions[0].convex);
  EXPECT_TRUE(bitwiseEqual(before, runGraph(g, in)));

  // Specialized already: a second pass finds nothing to do.
  EXPECT_FALSE(specializeGraph(g, {4}).changed());
}

// A dict something else may change (here a store under a key computed at run time) keeps its
// reads; a rank that follows from no input and no weight stays a question asked at run time.
TEST(Specialize, WhatMayChangeOrIsNotKnownStays) {
  auto computed = segmenter("    features[str(x.size(0))] = c1\n");
  const Specialized s = specializeGraph(computed, {4});
  EXPECT_EQ(s.dict_reads, 0);
  EXPECT_EQ(countNodes(*computed, "aten::__getitem__"), 1u);

  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%self : Tensor, %x : Tensor):
  %r : int = aten::dim(%x)
  return (%r))IR",
                      g.get());
  EXPECT_FALSE(specializeGraph(g, {std::nullopt}).changed());
  EXPECT_EQ(countNodes(*g, "aten::dim"), 1u);
  EXPECT_EQ(specializeGraph(g, {5}).rank_reads, 1);
  EXPECT_EQ(runGraph(g, {at::zeros({1}), at::zeros({1, 1, 1, 1, 1})}).toInt(), 5);
}
