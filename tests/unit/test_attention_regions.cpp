// Self-attention blocks as layout regions (tspass/regions.h): nn.MultiheadAttention's fast path
// (aten::_native_multi_head_attention, inside the branches of its checks) in the attention
// sample frozen is a region of its own; packed, it runs the runtime's xalloc::attention_packed
// within float rounding of ATen's, alone and in the model; a decision finds it by anchors and a
// second run finds it applied; blocks the runtime would only hand back to ATen (attention
// weights wanted, a mask, weights that are not constants) are no regions.
#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

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

using namespace xalloc;
using namespace xalloc::tspass;

namespace {

const char* kMha = "aten::_native_multi_head_attention";
const char* kPacked = "xalloc::attention_packed";

using xalloc::testing::Frozen;
using xalloc::testing::ranksOf;
using xalloc::testing::regionDecision;
using xalloc::testing::runGraph;

Frozen frozenAttention() {
  return xalloc::testing::frozenSample("attention");
}

// Nodes of `kind` in every block.
std::vector<torch::jit::Node*> find(torch::jit::Graph& g, const char* kind) {
  std::vector<torch::jit::Node*> out;
  for (torch::jit::Node* n : allNodes(g))
    if (hasKind(n, kind))
      out.push_back(n);
  return out;
}

std::vector<LayoutRegion> attentionRegions(Frozen& f) {
  auto all = findLayoutRegions(*f.graph, ranksOf(f));
  all.erase(std::remove_if(all.begin(), all.end(),
                           [](const LayoutRegion& r) {
                             return r.nodes.front()->kind() != c10::Symbol::fromQualString(kMha);
                           }),
            all.end());
  return all;
}

formats::RegionCandidate packed() {
  formats::RegionCandidate c;
  c.layout = formats::layoutTraits(formats::LayoutTarget::Contiguous, true);
  return c;
}

} // namespace

TEST(AttentionRegions, TheFastPathIsARegionInItsBranch) {
  Frozen f = frozenAttention();
  auto regions = attentionRegions(f);
  ASSERT_EQ(regions.size(), 1u);
  const LayoutRegion& r = regions[0];
  EXPECT_EQ(r.rank, 0);
  ASSERT_EQ(r.nodes.size(), 1u);
  EXPECT_NE(r.nodes[0]->owningBlock(), f.graph->block()) << "it sits in a branch";
  EXPECT_TRUE(r.convex);
  // It hands on its output alone: the attention weights are never asked for (undefined).
  ASSERT_EQ(regionExits(r).size(), 1u);
  EXPECT_EQ(regionExits(r)[0], r.nodes[0]->output(0));
}

namespace {
// The names of the ops dispatched while noteOp is a callback (RecordFunction's).
std::mutex g_ran_mutex;
std::set<std::string> g_ran;
std::unique_ptr<at::ObserverContext> noteOp(const at::RecordFunction& fn) {
  const std::lock_guard<std::mutex> lock(g_ran_mutex);
  g_ran.insert(fn.name());
  return nullptr;
}
} // namespace

TEST(AttentionRegions, PackedItRunsTheRuntimesAttentionWithinRounding) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  Frozen f = frozenAttention();
  c10::NoGradGuard no_grad; // the fast path's branch is taken without gradients
  const c10::IValue before = runGraph(f.graph, f.inputs);
  auto regions = attentionRegions(f);
  ASSERT_EQ(regions.size(), 1u);

  // Alone, as xprof times it: the region's graph packed computes what it computed.
  ExtractedRegion x = extractRegion(regions[0]);
  // It reads the normalized tokens [4, 64 tokens, 64]; xprof feeds what the model computed, the
  // test any tensor of their shape.
  ASSERT_EQ(x.inputs.size(), 1u);
  at::manual_seed(3);
  const std::vector<c10::IValue> in{at::randn({4, 64, 64})};
  const c10::IValue alone = runGraph(x.graph, in);
  const RegionEdit xe = applyRegionLayout(*x.graph, x.region, packed());
  ASSERT_TRUE(xe.applied) << xe.message;
  // Element by element: a few outputs near zero carry most of it (1.3e-5 seen on other draws),
  // within xrewrite's default tolerance, 1e-4.
  EXPECT_LE(maxRelativeError(alone, runGraph(x.graph, in)), 1e-4);

  // In the model: the op replaced in its branch, the model's outputs within rounding.
  const RegionEdit e = applyRegionLayout(*f.graph, regions[0], packed());
  ASSERT_TRUE(e.applied) << e.message;
  EXPECT_EQ(e.packed, 1);
  EXPECT_EQ(find(*f.graph, kMha).size(), 0u);
  ASSERT_EQ(find(*f.graph, kPacked).size(), 1u);
  // The ops the call dispatched: the packed op, and not ATen's attention (its reference path).
  c10::IValue after;
  {
    const std::lock_guard<std::mutex> lock(g_ran_mutex);
    g_ran.clear();
  }
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(noteOp).scopes({at::RecordScope::FUNCTION}));
  after = runGraph(f.graph, f.inputs);
  at::removeCallback(handle);
  const std::set<std::string> ran = [] {
    const std::lock_guard<std::mutex> lock(g_ran_mutex);
    return g_ran;
  }();
  EXPECT_TRUE(ran.count(kPacked)) << "the packed attention ran";
  EXPECT_FALSE(ran.count("aten::_native_multi_head_attention")) << "not its reference path";
  EXPECT_LE(maxRelativeError(before, after), 1e-5);
}

TEST(AttentionRegions, DecisionsFindItByAnchorsAndASecondRunFindsItApplied) {
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  Frozen f = frozenAttention();
  const auto ranks = ranksOf(f);
  auto regions = attentionRegions(f);
  ASSERT_EQ(regions.size(), 1u);
  GraphIndex index(*f.graph);
  formats::Schedule s;
  s.decisions.push_back(regionDecision(regions[0], index, "contiguous+packed"));

  auto first = applyRegionDecisions(*f.graph, s, ranks, true, true);
  ASSERT_EQ(first.results.size(), 1u);
  EXPECT_EQ(first.results[0].status, ApplyStatus::Applied) << first.results[0].message;
  EXPECT_EQ(find(*f.graph, kPacked).size(), 1u);
  EXPECT_EQ(find(*f.graph, "xalloc::activations_enter").size(), 1u)
      << "it runs the runtime's op: in the activation arena's scope";
  const std::string text = graphText(*f.graph);
  auto again = applyRegionDecisions(*f.graph, s, ranks, true, true);
  EXPECT_EQ(again.results[0].status, ApplyStatus::AlreadyApplied) << again.results[0].message;
  EXPECT_EQ(graphText(*f.graph), text);
}

TEST(AttentionRegions, BlocksTheRuntimeWouldHandBackAreNoRegions) {
  // Attention weights wanted.
  {
    Frozen f = frozenAttention();
    auto mha = find(*f.graph, kMha);
    ASSERT_EQ(mha.size(), 1u);
    torch::jit::WithInsertPoint guard(*f.graph->nodes().begin());
    mha[0]->replaceInput(10, f.graph->insertConstant(true));
    EXPECT_TRUE(attentionRegions(f).empty()) << "need_weights=True";
  }
  // A mask (any value in the mask's place).
  {
    Frozen f = frozenAttention();
    auto mha = find(*f.graph, kMha);
    ASSERT_EQ(mha.size(), 1u);
    mha[0]->replaceInput(9, mha[0]->input(0));
    EXPECT_TRUE(attentionRegions(f).empty()) << "a mask";
  }
  // Projections that are not constants (a model that is not frozen reads its attributes).
  {
    Frozen f = frozenAttention();
    auto mha = find(*f.graph, kMha);
    ASSERT_EQ(mha.size(), 1u);
    mha[0]->replaceInput(5, mha[0]->input(0));
    EXPECT_TRUE(attentionRegions(f).empty()) << "a weight computed at run time";
  }
}
