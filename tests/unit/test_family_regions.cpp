// Regions in the graphs other model families are made of: a detector's backbone reading an
// image batched from a list (its rank not known from the model's inputs), a video model's 3-D
// convolutions in oneDNN's blocked format, a segmenter's resizing inside its region; and the
// note that says why no region was found; inputs moved one ulp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/jit.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/layer_noise.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using namespace xalloc::tspass;
using xalloc::testing::countNodes;
using xalloc::testing::frozenGraph;
using xalloc::testing::runGraph;

namespace {

formats::RegionCandidate named(const char* name) {
  auto c = formats::parseCandidateName(name);
  EXPECT_TRUE(c) << name;
  return *c;
}

} // namespace

// A detector batches its images from a List[Tensor] (padded in place) before the backbone: the
// rank of what the first convolution reads follows from no input, but from its 4-D weight.
TEST(FamilyRegions, ABackboneReadingAnImageFromAListIsARegion) {
  auto g = frozenGraph(R"IR(
graph(%self : Tensor, %images : Tensor[], %w1 : Tensor, %w2 : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %img : Tensor = aten::__getitem__(%images, %zero)
  %x : Tensor = aten::unsqueeze(%img, %zero)
  %c1 : Tensor = aten::conv2d(%x, %w1, %none, %s, %s, %s, %one)
  %r1 : Tensor = aten::relu(%c1)
  %c2 : Tensor = aten::conv2d(%r1, %w2, %none, %s, %s, %s, %one)
  %r2 : Tensor = aten::relu(%c2)
  return (%r2))IR",
                       {at::randn({8, 3, 3, 3}), at::randn({8, 8, 3, 3})});
  auto regions = findLayoutRegions(*g, {std::nullopt});
  ASSERT_EQ(regions.size(), 1u) << graphText(*g);
  EXPECT_EQ(regions[0].rank, 4);
  EXPECT_EQ(regions[0].convolutions, 2);
  EXPECT_EQ(regions[0].nodes.size(), 4u);
  // Laid out channels-last and blocked, the values stay.
  const std::vector<c10::IValue> in{at::zeros({1}),
                                    c10::List<at::Tensor>({at::randn({3, 16, 16})})};
  const c10::IValue before = runGraph(g, in);
  for (const char* layout : {"channels_last", "blocked"}) {
    auto h = g->copy();
    auto r = findLayoutRegions(*h, {std::nullopt});
    ASSERT_EQ(r.size(), 1u);
    const RegionEdit e = applyRegionLayout(*h, r[0], named(layout));
    ASSERT_TRUE(e.applied) << layout << ": " << e.message;
    EXPECT_LE(maxRelativeError(before, runGraph(h, in)), 1e-4) << layout;
  }
  // A convolution whose weight is no constant (an unfrozen model) and whose input's rank is
  // unknown starts none.
  auto open = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%self : Tensor, %x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)
  return (%c))IR",
                      open.get());
  EXPECT_TRUE(findLayoutRegions(*open, {std::nullopt, std::nullopt}).empty());
  EXPECT_NE(whyNoRegion(*open).find("whose rank is known"), std::string::npos)
      << whyNoRegion(*open);
}

namespace {
// A video ResNet's block: conv3d with a bias, relu, conv3d, residual add, relu. Its weights and
// bias (%w*) become constants (frozenGraph).
const char* kVideoBlock = R"IR(
graph(%self : Tensor, %x : Tensor, %w1 : Tensor, %wb1 : Tensor, %w2 : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one, %one)
  %c1 : Tensor = aten::conv3d(%x, %w1, %wb1, %s, %s, %s, %one)
  %r1 : Tensor = aten::relu(%c1)
  %c2 : Tensor = aten::conv3d(%r1, %w2, %none, %s, %s, %s, %one)
  %a : Tensor = aten::add(%c2, %r1, %one)
  %r2 : Tensor = aten::relu_(%a)
  return (%r2))IR";
} // namespace

// A video model's 3-D convolutions: blocked (nCdhw16c) as oneDNN runs them, the weights blocked
// once, the residual add and relu on blocked tensors, the same values as ATen's within 1e-5 of
// their scale; channels-last-3d stays a candidate.
// A detector's head runs once per feature level, in a loop over the levels (RetinaNet's and
// SSD's heads, Faster R-CNN's RPN): its convolutions are a region of the loop's body, converted
// each trip, and every layout computes the same values on levels of different sizes.
TEST(FamilyRegions, ADetectorsHeadInALoopIsARegion) {
  auto cu = torch::jit::compile(R"PY(
def forward(self: Tensor, feats: List[Tensor], w1: Tensor, w2: Tensor):
    out: List[Tensor] = []
    for f in feats:
        h = torch.relu(torch.conv2d(f, w1, None, [1, 1], [1, 1], [1, 1], 1))
        y = torch.conv2d(h, w2, None, [1, 1], [0, 0], [1, 1], 1)
        out.append(y.flatten(1))
    return torch.cat(out, 1)
)PY");
  const auto ir = torch::jit::toGraphFunction(cu->get_function("forward")).graph();
  const std::vector<c10::IValue> in{
      at::zeros({1}), c10::List<at::Tensor>({at::randn({1, 8, 12, 12}), at::randn({1, 8, 6, 6})})};
  for (const char* layout : {"channels_last", "channels_last+packed", "blocked"}) {
    SCOPED_TRACE(layout);
    if (std::string(layout) != "channels_last" && !runtime::hasPackedConv())
      continue;
    auto g = frozenGraph(ir->copy(), {at::randn({16, 8, 3, 3}), at::randn({6, 16, 1, 1})});
    const c10::IValue before = runGraph(g, in);
    auto regions = findLayoutRegions(*g, {std::nullopt});
    ASSERT_EQ(regions.size(), 1u) << graphText(*g);
    EXPECT_EQ(regions[0].convolutions, 2);
    EXPECT_EQ(regions[0].nodes.front()->owningBlock()->owningNode()->kind(), c10::prim::Loop);
    EXPECT_TRUE(regions[0].convex);
    const RegionEdit e = applyRegionLayout(*g, regions[0], named(layout));
    ASSERT_TRUE(e.applied) << e.message;
    g->lint();
    std::size_t convs = 0, converted = 0; // in the loop's body
    for (const torch::jit::Node* n : allNodes(*g)) {
      convs += hasKind(n, "aten::conv2d");
      converted += hasKind(n, "aten::contiguous") || hasKind(n, "xalloc::to_blocked") ||
                   hasKind(n, "aten::to_dense");
    }
    EXPECT_EQ(convs, std::string(layout) == "channels_last" ? 2u : 0u);
    EXPECT_GE(converted, 2u); // the entry and the exit, each trip
    EXPECT_LE(maxRelativeError(before, runGraph(g, in)), 1e-4);
  }
}

TEST(FamilyRegions, ThreeDConvolutionsRunBlocked) {
  auto g = frozenGraph(kVideoBlock, {at::randn({20, 3, 3, 3, 3}).mul(0.3), at::randn({20}),
                                     at::randn({20, 20, 3, 3, 3}).mul(0.1)});
  const auto candidates = regionCandidates(5);
  std::vector<std::string> names;
  for (const auto& c : candidates)
    names.push_back(c.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "blocked"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "channels_last_3d"), names.end());
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 3, 4, 10, 10})};
  const c10::IValue before = runGraph(g, in);
  auto regions = findLayoutRegions(*g, {5});
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].rank, 5);
  const RegionEdit e = applyRegionLayout(*g, regions[0], named("blocked"));
  ASSERT_TRUE(e.applied) << e.message;
  EXPECT_EQ(countNodes(*g, "prim::mkldnn_convolution"), 2u) << graphText(*g);
  EXPECT_EQ(countNodes(*g, "aten::conv3d"), 0u);
  const c10::IValue after = runGraph(g, in);
  ASSERT_FALSE(after.toTensor().is_mkldnn());
  EXPECT_LE(maxRelativeError(before, after), 1e-4); // oneDNN sums in another order
  // The blocked constant checks a 3-D convolution's numbers as ATen does.
  EXPECT_THROW(runtime::MkldnnConstant(at::randn({4, 2, 3, 3, 3}), {1, 1, 1, 1, 1, 1, 1, 1, 1, 3}),
               c10::Error); // groups 3 does not divide 4 outputs
  EXPECT_THROW(runtime::MkldnnConstant(at::randn({4, 2, 3, 3}), {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}),
               c10::Error); // a 3-D convolution's numbers with a 4-D weight
}

// The same block with packed 3-D convolutions (NDHWC): channels_last_3d+packed fuses each
// convolution's relu; channels_last_3d+packed+add also the residual add and the relu after it,
// one xalloc::conv3d_packed_add. Both give ATen's values within 1e-5 of their scale.
TEST(FamilyRegions, ThreeDConvolutionsRunPacked) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  at::manual_seed(11);
  const std::vector<at::Tensor> weights{at::randn({20, 3, 3, 3, 3}).mul(0.3), at::randn({20}),
                                        at::randn({20, 20, 3, 3, 3}).mul(0.1)};
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 3, 4, 10, 10})};
  std::vector<std::string> names;
  for (const auto& c : regionCandidates(5))
    names.push_back(c.name());
  for (const char* layout : {"channels_last_3d+packed", "channels_last_3d+packed+add"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), layout), names.end()) << layout;
    auto g = frozenGraph(kVideoBlock, weights);
    const c10::IValue before = runGraph(g, in);
    auto regions = findLayoutRegions(*g, {5});
    ASSERT_EQ(regions.size(), 1u);
    const RegionEdit e = applyRegionLayout(*g, regions[0], named(layout));
    ASSERT_TRUE(e.applied) << layout << ": " << e.message;
    EXPECT_EQ(countNodes(*g, "aten::conv3d"), 0u) << graphText(*g);
    const bool add = std::string(layout).find("+add") != std::string::npos;
    EXPECT_EQ(countNodes(*g, "xalloc::conv3d_packed_add"), add ? 1u : 0u) << graphText(*g);
    EXPECT_EQ(countNodes(*g, "xalloc::conv3d_packed"), add ? 1u : 2u) << graphText(*g);
    EXPECT_EQ(countNodes(*g, "aten::relu"), 0u) << "the first relu fused: " << graphText(*g);
    EXPECT_EQ(countNodes(*g, "aten::relu_"), add ? 0u : 1u) << graphText(*g);
    const c10::IValue after = runGraph(g, in);
    EXPECT_TRUE(after.toTensor().is_contiguous()) << "the exit is made row-major again";
    // Float rounding of another summation order: oneDNN picks its kernel by the CPU (1.2e-5
    // on an AVX-512 VNNI/BF16 EPYC, below 1e-5 on another).
    EXPECT_LE(maxRelativeError(before, after), 5e-5) << layout;
    // The model's NCDHW input goes to the first packed convolution as it is (it converts it).
    EXPECT_EQ(packedConvsConvertEntries(*g), 1) << graphText(*g);
    EXPECT_LE(maxRelativeError(before, runGraph(g, in)), 5e-5) << layout;
  }
}

// A segmenter's head resizes inside its region: ASPP's pooled branch comes back to size and is
// concatenated with the others; the region runs through the resize instead of leaving it.
TEST(FamilyRegions, ResizingStaysInsideTheRegion) {
  auto g =
      frozenGraph(R"IR(
graph(%self : Tensor, %x : Tensor, %w1 : Tensor, %w2 : Tensor, %w3 : Tensor):
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %p : int[] = prim::ListConstruct(%zero, %zero)
  %d : int[] = prim::ListConstruct(%two, %two)
  %c1 : Tensor = aten::conv2d(%x, %w1, %none, %s, %d, %d, %one)
  %r1 : Tensor = aten::relu(%c1)
  %pool : Tensor = aten::adaptive_avg_pool2d(%r1, %s)
  %c2 : Tensor = aten::conv2d(%pool, %w2, %none, %s, %p, %s, %one)
  %h : int = aten::size(%r1, %two)
  %size : int[] = prim::ListConstruct(%h, %h)
  %up : Tensor = aten::upsample_bilinear2d(%c2, %size, %false, %none)
  %l : Tensor[] = prim::ListConstruct(%r1, %up)
  %cat : Tensor = aten::cat(%l, %one)
  %c3 : Tensor = aten::conv2d(%cat, %w3, %none, %s, %p, %s, %one)
  return (%c3))IR",
                  {at::randn({8, 4, 3, 3}), at::randn({8, 8, 1, 1}), at::randn({6, 16, 1, 1})});
  auto regions = findLayoutRegions(*g, {4});
  ASSERT_EQ(regions.size(), 1u) << graphText(*g);
  EXPECT_TRUE(regions[0].convex);
  EXPECT_EQ(regions[0].convolutions, 3);
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 4, 12, 12})};
  const c10::IValue before = runGraph(g, in);
  const RegionEdit e = applyRegionLayout(*g, regions[0], named("channels_last"));
  ASSERT_TRUE(e.applied) << e.message;
  EXPECT_EQ(e.entry_conversions, 1);
  EXPECT_LE(maxRelativeError(before, runGraph(g, in)), 1e-4);
}

// LR-ASPP's head adds its two classifiers, `low_classifier(low) + high_classifier(x)`: both
// convolutions are read by the add alone, and the add fuses into one of them.
TEST(FamilyRegions, AnAddOfTwoConvolutionsFusesOnce) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "the runtime was built without oneDNN";
  auto g = frozenGraph(R"IR(
graph(%self : Tensor, %x : Tensor, %w1 : Tensor, %w2 : Tensor, %w3 : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %p : int[] = prim::ListConstruct(%zero, %zero)
  %c1 : Tensor = aten::conv2d(%x, %w1, %none, %s, %s, %s, %one)
  %low : Tensor = aten::relu(%c1)
  %a : Tensor = aten::conv2d(%low, %w2, %none, %s, %p, %s, %one)
  %b : Tensor = aten::conv2d(%x, %w3, %none, %s, %p, %s, %one)
  %out : Tensor = aten::add(%a, %b, %one)
  return (%out))IR",
                       {at::randn({8, 4, 3, 3}), at::randn({5, 8, 1, 1}), at::randn({5, 4, 1, 1})});
  auto regions = findLayoutRegions(*g, {4});
  ASSERT_EQ(regions.size(), 1u) << graphText(*g);
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 4, 10, 10})};
  const c10::IValue before = runGraph(g, in);
  const RegionEdit e = applyRegionLayout(*g, regions[0], named("channels_last+packed+add"));
  ASSERT_TRUE(e.applied) << e.message;
  g->lint();
  EXPECT_EQ(countNodes(*g, "xalloc::conv2d_packed_add"), 1u);
  EXPECT_EQ(countNodes(*g, "xalloc::conv2d_packed"), 2u);
  EXPECT_EQ(countNodes(*g, "aten::add"), 0u);
  EXPECT_LE(maxRelativeError(before, runGraph(g, in)), 1e-5);
}

TEST(FamilyRegions, NoRegionSaysWhy) {
  auto none = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%self : Tensor, %x : Tensor):
  %y : Tensor = aten::relu(%x)
  return (%y))IR",
                      none.get());
  EXPECT_NE(whyNoRegion(*none).find("has no 2-D or 3-D convolution"), std::string::npos);
  auto branch = frozenGraph(R"IR(
graph(%self : Tensor, %x : Tensor, %flag : bool, %w : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %y : Tensor = prim::If(%flag)
    block0():
      %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)
      -> (%c)
    block1():
      -> (%x)
  return (%y))IR",
                            {at::randn({4, 4, 3, 3})});
  // A convolution in a branch is a region of the branch's block.
  const auto regions = findLayoutRegions(*branch, {4, std::nullopt});
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_NE(regions[0].nodes.front()->owningBlock(), branch->block());
  auto padded = frozenGraph(R"IR(
graph(%self : Tensor, %x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %same : str = prim::Constant[value="same"]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %same, %s, %one)
  return (%c))IR",
                            {at::randn({4, 4, 3, 3})});
  EXPECT_TRUE(findLayoutRegions(*padded, {4}).empty());
  EXPECT_NE(whyNoRegion(*padded).find("padding as a string"), std::string::npos)
      << whyNoRegion(*padded);
}

// One ulp away: every float element moved by exactly one unit in the last place, up or down,
// in lists too, the layout kept; other values as they are.
TEST(FamilyRegions, OneUlpAwayMovesEachFloatByOneUlp) {
  const at::Tensor x = at::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor i = at::arange(6);
  const auto moved = oneUlpAway({x, c10::List<at::Tensor>({x}), i}, 0);
  ASSERT_EQ(moved.size(), 3u);
  const at::Tensor y = moved[0].toTensor();
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  const at::Tensor up = at::nextafter(x, at::full_like(x, INFINITY));
  const at::Tensor down = at::nextafter(x, at::full_like(x, -INFINITY));
  EXPECT_TRUE(at::logical_or(y.eq(up), y.eq(down)).all().item<bool>());
  EXPECT_GT(y.eq(up).sum().item<std::int64_t>(), 0);
  EXPECT_GT(y.eq(down).sum().item<std::int64_t>(), 0);
  EXPECT_FALSE(at::equal(moved[1].toTensorList().get(0), x));
  EXPECT_TRUE(at::equal(moved[2].toTensor(), i));
  // Seeded: the same draw twice gives the same tensor, another draw another.
  EXPECT_TRUE(at::equal(oneUlpAway({x}, 0)[0].toTensor(), y));
  EXPECT_FALSE(at::equal(oneUlpAway({x}, 1)[0].toTensor(), y));
  // A relu's zeros and subnormals stay: one ulp from zero is a subnormal, slow to compute on.
  const at::Tensor z = at::relu(at::randn({1000}));
  const at::Tensor zs = at::cat({z, at::full({4}, 1e-40)});
  const at::Tensor zm = oneUlpAway({zs}, 0)[0].toTensor();
  EXPECT_TRUE(at::equal(zm.eq(0), zs.eq(0)));
  EXPECT_TRUE(at::equal(zm.slice(0, 1000), zs.slice(0, 1000)));
  EXPECT_FALSE(at::equal(zm, zs)) << "the normal values move";
}

// Outputs compared blind to order: a detector's detections with two nearly equal scores swapped
// are the same multiset; a changed value is not.
// Another summation order's reference (layer_noise.h): each convolution's output moved one ulp,
// up or down at random, its zeros kept; what reads it reads the moved value.
TEST(FamilyRegions, EachLayersOutputMovesOneUlp) {
  auto g = frozenGraph(R"IR(
graph(%self : Tensor, %x : Tensor, %w1 : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %c1 : Tensor = aten::conv2d(%x, %w1, %none, %s, %s, %s, %one)
  %r1 : Tensor = aten::relu(%c1)
  %t : (Tensor, Tensor) = prim::TupleConstruct(%c1, %r1)
  return (%t))IR",
                       {at::randn({8, 4, 3, 3})});
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({1, 4, 10, 10})};
  const c10::IValue before = runGraph(g, in);
  ASSERT_EQ(moveLayerOutputsOneUlp(*g), 1);
  g->lint();
  at::manual_seed(7);
  const c10::IValue after = runGraph(g, in);
  const at::Tensor c = before.toTupleRef().elements()[0].toTensor();
  const at::Tensor m = after.toTupleRef().elements()[0].toTensor();
  const at::Tensor up = at::nextafter(c, at::full_like(c, INFINITY));
  const at::Tensor down = at::nextafter(c, at::full_like(c, -INFINITY));
  EXPECT_TRUE(at::logical_or(m.eq(up), m.eq(down)).all().item<bool>());
  EXPECT_GT(m.eq(up).sum().item<std::int64_t>(), 0);
  EXPECT_GT(m.eq(down).sum().item<std::int64_t>(), 0);
  const at::Tensor r = after.toTupleRef().elements()[1].toTensor();
  EXPECT_TRUE(at::equal(r, at::relu(m))) << "the relu reads the moved output";
}

// The move itself (xalloc_noise::one_ulp_away_): in place, one ulp up or down, the same every
// run, another layer another pattern; zeros, subnormals, infinities and NaN kept; a double
// layer moved by a double's ulp; a view that is not dense moved where it lies.
TEST(FamilyRegions, TheLayerMoveKeepsSpecialsAndHandlesViewsAndDoubles) {
  auto op = c10::Dispatcher::singleton()
                .findSchemaOrThrow("xalloc_noise::one_ulp_away_", "")
                .typed<at::Tensor&(at::Tensor&, std::int64_t)>();
  auto moved = [&](const at::Tensor& x, std::int64_t seed) {
    at::Tensor y = x.clone();
    at::Tensor& out = op.call(y, seed);
    EXPECT_TRUE(out.is_same(y));
    return y;
  };
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor x = at::randn({3000}, dtype);
    const at::Tensor y = moved(x, 0);
    const at::Tensor up = at::nextafter(x, at::full_like(x, INFINITY));
    const at::Tensor down = at::nextafter(x, at::full_like(x, -INFINITY));
    EXPECT_TRUE(at::logical_or(y.eq(up), y.eq(down)).all().item<bool>()) << dtype;
    EXPECT_GT(y.eq(up).sum().item<std::int64_t>(), 1200) << dtype;
    EXPECT_GT(y.eq(down).sum().item<std::int64_t>(), 1200) << dtype;
    EXPECT_TRUE(at::equal(moved(x, 0), y)) << "the same every run";
    EXPECT_FALSE(at::equal(moved(x, 1), y)) << "another layer, another pattern";
  }
  const at::Tensor specials = at::tensor({0.0f, -0.0f, 1e-40f, INFINITY, -INFINITY, NAN});
  const at::Tensor s = moved(specials, 5);
  EXPECT_TRUE(at::equal(s.slice(0, 0, 5), specials.slice(0, 0, 5)));
  EXPECT_TRUE(std::isnan(s[5].item<float>()));
  const at::Tensor t = at::randn({40, 30}).t();                      // dense, transposed
  const at::Tensor strided = at::randn({40, 60}).slice(1, 0, 60, 2); // not dense
  for (const at::Tensor& v : {t, strided}) {
    at::Tensor w = v; // the view itself, as a layer's output is
    const at::Tensor before = v.clone();
    op.call(w, 2);
    const at::Tensor up = at::nextafter(before, at::full_like(before, INFINITY));
    const at::Tensor down = at::nextafter(before, at::full_like(before, -INFINITY));
    EXPECT_TRUE(at::logical_or(w.eq(up), w.eq(down)).all().item<bool>());
    EXPECT_FALSE(at::equal(w, before));
  }
}

TEST(FamilyRegions, SortedErrorIsBlindToOrderOnly) {
  const at::Tensor scores = at::tensor({0.9f, 0.5f, 0.5001f, 0.1f});
  const at::Tensor labels = at::tensor({3, 7, 2, 1});
  const at::Tensor swapped_scores = at::tensor({0.9f, 0.5001f, 0.5f, 0.1f});
  const at::Tensor swapped_labels = at::tensor({3, 2, 7, 1});
  const c10::IValue a = c10::ivalue::Tuple::create({scores, labels});
  const c10::IValue b = c10::ivalue::Tuple::create({swapped_scores, swapped_labels});
  EXPECT_EQ(maxRelativeError(a, b), INFINITY);
  EXPECT_EQ(maxSortedError(a, b), 0.0);
  const c10::IValue c = c10::ivalue::Tuple::create({swapped_scores, at::tensor({3, 2, 7, 9})});
  EXPECT_EQ(maxSortedError(a, c), INFINITY);
  const c10::IValue d =
      c10::ivalue::Tuple::create({at::tensor({0.9f, 0.5001f, 0.6f, 0.1f}), swapped_labels});
  EXPECT_GT(maxSortedError(a, d), 1e-2);
}
