// Layout regions (tspass/regions.h) on the TinyCNN test model frozen, and on small graphs: what a
// region holds and what stays out, each candidate layout rewritten in place and still computing
// the same values, packed and blocked regions surviving save and load, a region decided as a
// whole by xrewrite's pass and found again (or found applied) on a second run.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/serialization/import.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"
#include "temp_path.h"

using namespace xalloc;
using namespace xalloc::tspass;
using formats::LayoutTarget;
using formats::RegionCandidate;

namespace {

using xalloc::testing::countNodes;
using xalloc::testing::Frozen;
using xalloc::testing::frozenSample;
using xalloc::testing::ranksOf;
using xalloc::testing::regionDecision;
using xalloc::testing::runGraph;

// TinyCNN frozen, inlined (as xrewrite --freeze and xprof's regions see it).
Frozen frozenTinyCnn() {
  return frozenSample("tinycnn");
}

std::size_t countIn(const LayoutRegion& r, const char* kind) {
  const auto k = c10::Symbol::fromQualString(kind);
  return static_cast<std::size_t>(std::count_if(
      r.nodes.begin(), r.nodes.end(), [&](const torch::jit::Node* n) { return n->kind() == k; }));
}

// The regions of convolutions (the head's linear is a region of its own, rank 0).
std::vector<LayoutRegion> convRegions(torch::jit::Graph& g,
                                      const std::vector<std::optional<int>>& ranks) {
  auto all = findLayoutRegions(g, ranks);
  all.erase(
      std::remove_if(all.begin(), all.end(), [](const LayoutRegion& r) { return r.rank == 0; }),
      all.end());
  return all;
}

RegionCandidate candidate(LayoutTarget t, bool packed = false) {
  RegionCandidate c;
  c.layout = formats::layoutTraits(t, packed);
  return c;
}

} // namespace

// formats' rows and tspass's objects are one table: each row has its object, in the
// same order, and every name a document may carry parses back to its own row.
TEST(RegionLayouts, TraitsRowsAndLayoutObjectsAreOneTable) {
  const auto& rows = formats::regionLayoutTraits();
  const auto& objects = regionLayouts();
  ASSERT_EQ(rows.size(), objects.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(&objects[i]->traits(), &rows[i]) << rows[i].name;
    auto c = formats::parseCandidateName(rows[i].name);
    ASSERT_TRUE(c) << rows[i].name;
    EXPECT_EQ(c->name(), rows[i].name);
    EXPECT_EQ(&regionLayout(*c), objects[i]);
    EXPECT_EQ(c->needsRuntime(), rows[i].needs_runtime);
  }
  EXPECT_STREQ(rows.front().name, "contiguous"); // the region as it is comes first
  EXPECT_FALSE(formats::parseCandidateName("blocked+packed"));
  EXPECT_FALSE(formats::parseCandidateName("channels_last_3d+blocked"));
  // Candidates per rank: as it is first, then only the layouts that fit it.
  for (int rank : {0, 4, 5}) {
    const auto cands = regionCandidates(rank);
    ASSERT_FALSE(cands.empty());
    EXPECT_EQ(cands.front().name(), "contiguous");
    for (const auto& c : cands)
      EXPECT_TRUE(c.traits().fits(rank)) << c.name() << " at rank " << rank;
  }
  // contiguous, channels_last_3d, its packed forms (with oneDNN), blocked
  EXPECT_EQ(regionCandidates(5).size(), runtime::hasPackedConv() ? 5u : 3u);
}

TEST(Regions, TinyCnnIsOneRegionFromStemToPooling) {
  Frozen f = frozenTinyCnn();
  auto regions = convRegions(*f.graph, ranksOf(f));
  ASSERT_EQ(regions.size(), 1u);
  const LayoutRegion& r = regions[0];
  EXPECT_EQ(r.rank, 4);
  EXPECT_TRUE(r.convex);
  // stem, depthwise, the two of squeeze-and-excitation, pointwise: the batch norms are folded.
  EXPECT_EQ(r.convolutions, 5);
  EXPECT_EQ(countIn(r, "aten::conv2d"), 5u);
  EXPECT_EQ(countIn(r, "aten::batch_norm"), 0u);
  EXPECT_GE(countIn(r, "aten::silu") + countIn(r, "aten::silu_"), 2u);
  EXPECT_EQ(countIn(r, "aten::sigmoid"), 1u);
  EXPECT_EQ(countIn(r, "aten::mul"), 1u);
  EXPECT_EQ(countIn(r, "aten::max_pool2d"), 1u);
  EXPECT_EQ(countIn(r, "aten::adaptive_avg_pool2d"), 2u);
  // What flattens and classifies is outside: it fixes the layout.
  EXPECT_EQ(countIn(r, "aten::flatten"), 0u);
  EXPECT_EQ(countIn(r, "aten::linear"), 0u);
  ASSERT_EQ(regionEntries(r).size(), 1u);
  EXPECT_EQ(regionEntries(r)[0], f.graph->inputs()[1]);
  ASSERT_EQ(regionExits(r).size(), 1u);
  EXPECT_EQ(regionExits(r)[0]->uses()[0].user->kind(),
            c10::Symbol::fromQualString("aten::flatten"));
}

TEST(Regions, FrozenLinearIsARegionOfItsOwnAndPacks) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  Frozen f = frozenTinyCnn();
  auto all = findLayoutRegions(*f.graph, ranksOf(f));
  ASSERT_EQ(all.size(), 2u);
  LayoutRegion& lin = all[1];
  EXPECT_EQ(lin.rank, 0);
  ASSERT_EQ(lin.nodes.size(), 1u);
  EXPECT_EQ(lin.nodes[0]->kind(), c10::Symbol::fromQualString("aten::linear"));
  const c10::IValue before = runGraph(f.graph, f.inputs);
  // Its activations stay as they are: only the weight is packed.
  EXPECT_FALSE(applyRegionLayout(*f.graph, lin, candidate(LayoutTarget::ChannelsLast)).applied);
  const RegionEdit e = applyRegionLayout(*f.graph, lin, candidate(LayoutTarget::Contiguous, true));
  ASSERT_TRUE(e.applied) << e.message;
  EXPECT_EQ(e.packed, 1);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::linear_packed"), 1u);
  EXPECT_EQ(countNodes(*f.graph, "aten::linear"), 0u);
  EXPECT_LE(maxRelativeError(before, runGraph(f.graph, f.inputs)), 1e-5);
}

// An input of unknown rank: the frozen convolutions' 4-D weights say the rank (a detector's
// image batched from a list reads so), and the regions are those of a known 4-D input.
TEST(Regions, InputOfUnknownRankTakesTheWeightsRank) {
  Frozen f = frozenTinyCnn();
  const auto known = convRegions(*f.graph, ranksOf(f));
  for (const std::vector<std::optional<int>>& ranks :
       {std::vector<std::optional<int>>{std::nullopt}, std::vector<std::optional<int>>{}}) {
    const auto found = convRegions(*f.graph, ranks);
    ASSERT_EQ(found.size(), known.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
      EXPECT_EQ(found[i].nodes, known[i].nodes);
      EXPECT_EQ(found[i].rank, 4);
    }
  }
}

TEST(Regions, InPlaceWriteOfAnOutsideValueStaysOut) {
  // relu_ writes the graph's input: converted at the region's entry, it would write the copy.
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%self : Tensor, %x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %r : Tensor = aten::relu_(%x)
  %c : Tensor = aten::conv2d(%r, %w, %none, %s, %s, %s, %one)
  %y : Tensor = aten::relu_(%c)
  %z : Tensor = aten::add(%y, %x, %one)
  return (%z))IR",
                      g.get());
  auto regions = findLayoutRegions(*g, {4, 4});
  ASSERT_EQ(regions.size(), 1u);
  std::vector<std::string> kinds;
  for (auto* n : regions[0].nodes)
    kinds.push_back(n->kind().toQualString());
  EXPECT_EQ(kinds, (std::vector<std::string>{"aten::conv2d", "aten::relu_", "aten::add"}));
  // Both reads of the input come from outside: the input is the one entry.
  ASSERT_EQ(regionEntries(regions[0]).size(), 2u); // the relu_ output and the input itself
}

TEST(Regions, EveryCandidateKeepsTheValues) {
  const std::vector<RegionCandidate> cands = {candidate(LayoutTarget::ChannelsLast),
                                              candidate(LayoutTarget::ChannelsLast, true),
                                              candidate(LayoutTarget::Blocked)};
  for (const auto& c : cands) {
    if (c.packed() && !runtime::hasPackedConv())
      continue;
    SCOPED_TRACE(c.name());
    Frozen f = frozenTinyCnn();
    const c10::IValue before = runGraph(f.graph, f.inputs);
    auto regions = convRegions(*f.graph, ranksOf(f));
    ASSERT_EQ(regions.size(), 1u);
    const RegionEdit e = applyRegionLayout(*f.graph, regions[0], c);
    ASSERT_TRUE(e.applied) << e.message;
    f.graph->lint();
    const c10::IValue after = runGraph(f.graph, f.inputs);
    EXPECT_LE(maxRelativeError(before, after), 1e-5);
    // The model's output keeps its layout.
    EXPECT_TRUE(after.toTensor().is_contiguous());
    if (c.target() == LayoutTarget::ChannelsLast && !c.packed()) {
      EXPECT_EQ(e.entry_conversions, 1);
      EXPECT_EQ(e.exit_conversions, 1);
      // The stem's: the 1x1 and depthwise convolutions' weights are channels-last already.
      EXPECT_EQ(e.weights_relaid, 1);
    }
    if (c.packed()) {
      EXPECT_EQ(e.packed, 5);
      EXPECT_EQ(countNodes(*f.graph, "xalloc::conv2d_packed"), 5u);
      EXPECT_EQ(countNodes(*f.graph, "aten::conv2d"), 0u);
      // relu after the stem, silu after the depthwise and the squeeze, sigmoid after the expand.
      EXPECT_EQ(e.fused, 4);
    }
    if (c.target() == LayoutTarget::Blocked) {
      EXPECT_EQ(countNodes(*f.graph, "prim::mkldnn_convolution"), 5u);
      EXPECT_GE(countNodes(*f.graph, "xalloc::to_blocked"), 1u);
      EXPECT_GE(countNodes(*f.graph, "aten::to_dense"), 1u);
      EXPECT_EQ(countNodes(*f.graph, "prim::BroadcastMKLDNNTensors"), 0u);
    }
  }
}

namespace {
// Every 4-D region of the sample `name`, frozen, rewritten channels_last+packed+add: `adds`
// residual adds fused (and at least `fused` ops), the values within a reordered sum, saved and
// loaded bit-identical, the graph reading as applied.
void expectResidualAddsFused(const char* name, std::size_t adds, std::int64_t fused) {
  SCOPED_TRACE(name);
  Frozen f = frozenSample(name, /*inlined=*/false);
  const c10::IValue before = runGraph(f.graph, f.inputs); // a copy: the method is not run yet
  ASSERT_EQ(countNodes(*f.graph, "aten::add") + countNodes(*f.graph, "aten::add_"), adds);
  const auto layout = formats::parseCandidateName("channels_last+packed+add");
  ASSERT_TRUE(layout);
  std::int64_t n = 0;
  for (LayoutRegion& r : convRegions(*f.graph, ranksOf(f))) {
    const RegionEdit e = applyRegionLayout(*f.graph, r, *layout);
    ASSERT_TRUE(e.applied) << e.message;
    n += e.fused;
    for (const torch::jit::Node* node : r.nodes)
      EXPECT_NE(node->kind(), c10::aten::conv2d) << "a convolution left unpacked";
  }
  f.graph->lint();
  EXPECT_EQ(countNodes(*f.graph, "xalloc::conv2d_packed_add"), adds);
  EXPECT_EQ(countNodes(*f.graph, "aten::add") + countNodes(*f.graph, "aten::add_"), 0u);
  EXPECT_GE(n, fused);
  const c10::IValue after = f.model.module.forward({f.inputs.begin() + 1, f.inputs.end()});
  EXPECT_LE(maxRelativeError(before, after), 1e-5);
  EXPECT_TRUE(bitwiseEqual(after, runGraph(f.graph, f.inputs)));
  const std::string saved = xalloc::testing::tempPath("residual.pt");
  saveModel(f.model.module, saved, {});
  LoadedModel back = loadModel(saved);
  std::remove(saved.c_str());
  const c10::IValue loaded = back.module.forward({f.inputs.begin() + 1, f.inputs.end()});
  EXPECT_TRUE(bitwiseEqual(after, loaded)) << maxRelativeError(after, loaded);
  const RegionLayout& l = regionLayout(*layout);
  bool applied = false;
  for (const torch::jit::Node* node : f.graph->nodes())
    applied = applied || l.appliedAt(node, "aten::conv2d");
  EXPECT_TRUE(applied);
}
} // namespace

// channels_last+packed+add: SmallCNN's basic block `relu(conv2(y) + x)` and its MBConvs'
// `x + project(y)`; three torchvision basic blocks in a row (`out += identity`, the first block's
// output the second's residual, the third's downsampling computed after its conv2, so its conv2
// moves down to the add).
TEST(Regions, ResidualAddsFuseIntoThePackedConvolution) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "the runtime was built without oneDNN";
  expectResidualAddsFused("smallcnn", 3, 4);  // 3 adds and the basic block's relu
  expectResidualAddsFused("resblocks", 3, 6); // 3 adds, 3 relus
}

// A concatenation of tensors the region makes (SqueezeNet's Fire modules) is a region op, with
// the list it reads: FireNet is one region from the stem to the pooling, and every layout keeps
// its values through the concatenations (blocked reads them dense), saved and loaded.
TEST(Regions, ConcatenationsKeepTheRegionsLayout) {
  for (const formats::LayoutTraits& t : formats::regionLayoutTraits()) {
    if (!t.fits(4) || t.name == std::string("contiguous"))
      continue;
    if (t.needs_onednn && !runtime::hasPackedConv())
      continue;
    SCOPED_TRACE(t.name);
    Frozen f = frozenSample("firenet", /*inlined=*/false);
    const c10::IValue before = runGraph(f.graph, f.inputs);
    auto regions = convRegions(*f.graph, ranksOf(f));
    ASSERT_EQ(regions.size(), 1u);
    EXPECT_EQ(regions[0].convolutions, 7);
    EXPECT_EQ(countIn(regions[0], "aten::cat"), 2u);
    EXPECT_EQ(countIn(regions[0], "prim::ListConstruct"), 2u);
    EXPECT_EQ(regionEntries(regions[0]).size(), 1u);
    EXPECT_EQ(regionExits(regions[0]).size(), 1u);
    const RegionEdit e = applyRegionLayout(*f.graph, regions[0], formats::candidateOf(t));
    if (t.name == std::string("channels_last+packed+add")) {
      // FireNet has no residual add: the layout says so rather than repeat channels_last+packed.
      EXPECT_FALSE(e.applied);
      EXPECT_NE(e.message.find("residual add"), std::string::npos) << e.message;
      continue;
    }
    ASSERT_TRUE(e.applied) << e.message;
    f.graph->lint();
    // The packed layouts pool with the runtime's max pooling (no indices); the others with ATen's.
    // They also split the second Fire's squeeze convolution over the first's two halves, the
    // concatenation gone (split_cats.cpp); the last one, read by the pooling, stays.
    const bool packed = t.name == std::string("channels_last+packed");
    EXPECT_EQ(countNodes(*f.graph, "aten::cat"), packed ? 1u : 2u);
    EXPECT_EQ(countNodes(*f.graph, "xalloc::conv2d_packed_add"), packed ? 1u : 0u);
    EXPECT_EQ(e.pools, packed ? 1 : 0);
    EXPECT_EQ(countNodes(*f.graph, "xalloc::max_pool2d"), packed ? 1u : 0u);
    const c10::IValue after = f.model.module.forward({f.inputs.begin() + 1, f.inputs.end()});
    EXPECT_LE(maxRelativeError(before, after), 1e-5);
    const std::string saved = xalloc::testing::tempPath("firenet.pt");
    saveModel(f.model.module, saved, {});
    LoadedModel back = loadModel(saved);
    std::remove(saved.c_str());
    EXPECT_TRUE(bitwiseEqual(after, back.module.forward({f.inputs.begin() + 1, f.inputs.end()})));
  }
}

TEST(Regions, PackedAndBlockedRegionsSurviveSaveAndLoad) {
  for (const auto& c :
       {candidate(LayoutTarget::ChannelsLast, true), candidate(LayoutTarget::Blocked)}) {
    if (c.packed() && !runtime::hasPackedConv())
      continue;
    SCOPED_TRACE(c.name());
    Frozen f = frozenTinyCnn();
    auto regions = convRegions(*f.graph, ranksOf(f));
    ASSERT_EQ(regions.size(), 1u);
    ASSERT_TRUE(applyRegionLayout(*f.graph, regions[0], c).applied);
    const c10::IValue before = f.model.module.forward({f.inputs.begin() + 1, f.inputs.end()});
    const std::string path = xalloc::testing::tempPath("region.pt");
    saveModel(f.model.module, path, {});
    LoadedModel back = loadModel(path);
    std::remove(path.c_str());
    const c10::IValue after = back.module.forward({f.inputs.begin() + 1, f.inputs.end()});
    EXPECT_TRUE(bitwiseEqual(before, after));
  }
}

TEST(Regions, ExtractedRegionRunsAloneAsInTheModel) {
  Frozen f = frozenTinyCnn();
  auto regions = convRegions(*f.graph, ranksOf(f));
  ASSERT_EQ(regions.size(), 1u);
  ExtractedRegion x = extractRegion(regions[0]);
  ASSERT_EQ(x.inputs.size(), 1u);
  ASSERT_EQ(x.outputs.size(), 1u);
  x.graph->lint();
  // The region's exit is the global pooling of the model's input: run it on that input.
  const c10::IValue alone = runGraph(x.graph, {f.inputs[1]});
  EXPECT_EQ(alone.toTensor().sizes(), (std::vector<std::int64_t>{2, 16, 1, 1}));
  // And the same region rewritten in channels-last, alone, gives the same values.
  ExtractedRegion y = extractRegion(regions[0]);
  ASSERT_TRUE(applyRegionLayout(*y.graph, y.region, candidate(LayoutTarget::ChannelsLast)).applied);
  EXPECT_LE(maxRelativeError(alone, runGraph(y.graph, {f.inputs[1]})), 1e-5);
}

TEST(Regions, DecisionsFindTheRegionByAnchorsAndAreIdempotent) {
  Frozen f = frozenTinyCnn();
  const auto ranks = ranksOf(f);
  auto regions = convRegions(*f.graph, ranks);
  ASSERT_EQ(regions.size(), 1u);
  GraphIndex index(*f.graph);
  formats::Schedule s;
  const formats::Decision d = regionDecision(regions[0], index, "channels_last");
  s.decisions.push_back(d);
  EXPECT_TRUE(sameRegion(regions[0], index, *d.region));

  // Not frozen: nothing is applied. Frozen: applied once, then found applied.
  auto skipped = applyRegionDecisions(*f.graph, s, ranks, /*frozen=*/false, true);
  ASSERT_EQ(skipped.results.size(), 1u);
  EXPECT_EQ(skipped.results[0].status, ApplyStatus::Skipped);
  auto first = applyRegionDecisions(*f.graph, s, ranks, true, true);
  ASSERT_EQ(first.results.size(), 1u);
  EXPECT_EQ(first.results[0].status, ApplyStatus::Applied) << first.results[0].message;
  const std::string text = graphText(*f.graph);
  auto again = applyRegionDecisions(*f.graph, s, ranks, true, true);
  EXPECT_EQ(again.results[0].status, ApplyStatus::AlreadyApplied) << again.results[0].message;
  EXPECT_EQ(graphText(*f.graph), text);
  // channels_last runs ATen's ops alone: no runtime, no activation scope.
  EXPECT_EQ(countNodes(*f.graph, "xalloc::activations_enter"), 0u);

  // A region that is not there (another op list) is not found, and nothing changes.
  formats::Decision other = d;
  other.region->nodes.pop_back();
  formats::Schedule s2;
  s2.decisions.push_back(other);
  Frozen g = frozenTinyCnn();
  auto missing = applyRegionDecisions(*g.graph, s2, ranks, true, true);
  EXPECT_EQ(missing.results[0].status, ApplyStatus::NotFound);
}

TEST(Regions, PackedNeedsTheFastForm) {
  Frozen f = frozenTinyCnn();
  const auto ranks = ranksOf(f);
  auto regions = convRegions(*f.graph, ranks);
  GraphIndex index(*f.graph);
  formats::Schedule s;
  s.decisions.push_back(regionDecision(regions[0], index, "channels_last+packed"));
  auto r = applyRegionDecisions(*f.graph, s, ranks, true, /*fast_form=*/false);
  EXPECT_EQ(r.results[0].status, ApplyStatus::Skipped);
  EXPECT_NE(r.results[0].message.find("--form fast"), std::string::npos);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::conv2d_packed"), 0u);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::activations_enter"), 0u);
  if (!runtime::hasPackedConv())
    return;
  // In the fast form the graph runs the runtime's ops, and takes its activations from the
  // runtime's cache: one scope around the whole graph.
  auto fast = applyRegionDecisions(*f.graph, s, ranks, true, /*fast_form=*/true);
  ASSERT_EQ(fast.results[0].status, ApplyStatus::Applied) << fast.results[0].message;
  EXPECT_EQ(countNodes(*f.graph, "xalloc::activations_enter"), 1u);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::activations_exit"), 1u);
  EXPECT_EQ(f.graph->return_node()->prev()->kind().toQualString(),
            std::string("xalloc::activations_exit"));
}

TEST(Regions, PackedConvolutionMatchesAtenAndRejectsBadInput) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 8, 9, 9});
  const at::Tensor w = at::randn({8, 1, 3, 3}), b = at::randn({8});
  runtime::PackedConv p(w, b, {2, 2}, {1, 1}, {1, 1}, 8, "silu");
  const at::Tensor got = p.run(x);
  const at::Tensor want = at::silu(at::conv2d(x, w, b, {2, 2}, {1, 1}, {1, 1}, 8));
  EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_LE((got - want).abs().max().item<double>() / want.abs().max().item<double>(), 1e-5);
  // A second shape is packed for anew, the first still served.
  EXPECT_EQ(p.run(at::randn({1, 8, 5, 5})).sizes(), (std::vector<std::int64_t>{1, 8, 3, 3}));
  EXPECT_THROW(p.run(at::randn({2, 4, 9, 9})), c10::Error);
  EXPECT_THROW(runtime::PackedConv(w, b, {1, 1}, {0, 0}, {1, 1}, 8, "swish"), c10::Error);
}

// A channels-last value turned back into NCHW right before a convolution: run channels-last,
// the region reads the channels-last value itself and the round trip is gone, with the same
// bits.
TEST(Regions, AChannelsLastRoundTripBeforeTheRegionIsRemoved) {
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%self : Tensor, %x : Tensor, %w : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %cl : int = prim::Constant[value=2]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %xc : Tensor = aten::contiguous(%x, %cl)
  %xr : Tensor = aten::contiguous(%xc, %zero)
  %c : Tensor = aten::conv2d(%xr, %w, %none, %s, %s, %s, %one)
  %y : Tensor = aten::relu(%c)
  return (%y))IR",
                      g.get());
  const auto before = g->copy();
  auto regions = findLayoutRegions(*g, {4, 4});
  ASSERT_EQ(regions.size(), 1u);
  const RegionEdit e = applyRegionLayout(*g, regions[0], candidate(LayoutTarget::ChannelsLast));
  ASSERT_TRUE(e.applied) << e.message;
  EXPECT_EQ(e.removed_conversions, 1);
  const torch::jit::Node* conv = nullptr;
  for (const auto* n : g->nodes())
    if (n->kind() == c10::aten::conv2d)
      conv = n;
  ASSERT_NE(conv, nullptr);
  const torch::jit::Node* entry = conv->input(0)->node();
  ASSERT_EQ(entry->kind(), c10::aten::contiguous);
  EXPECT_EQ(entry->input(0)->node()->kind(), c10::aten::contiguous); // %xc itself
  EXPECT_FALSE(isRowMajorContiguousCall(entry->input(0)->node())) << graphText(*g);
  std::size_t row_major = 0;
  for (const auto* n : g->nodes())
    row_major += isRowMajorContiguousCall(n);
  EXPECT_EQ(row_major, 1u) << graphText(*g); // the exit's, none at the entry
  const std::vector<c10::IValue> in{at::zeros({1}), at::randn({2, 8, 12, 12}),
                                    at::randn({16, 8, 3, 3})};
  EXPECT_TRUE(at::equal(runGraph(g, in).toTensor(), runGraph(before, in).toTensor()));
}
