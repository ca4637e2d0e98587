// tspass on small graphs: a constant's permutation chains stored so they come out contiguous, a
// sync on a frozen weight stored once; a conversion fused into its pointwise producer (its out
// variant writing row-major), and not where the output is read elsewhere.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/constants.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/producer_fusion.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/source_info.h"

#include "graph_lookup.h"

using namespace xalloc;
using namespace xalloc::tspass;
using namespace xalloc::tspass::testing;
using formats::Action;

TEST(ConstantTensors, PermutationChainsOfAConstantAreStoredSoTheyComeOutContiguous) {
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::Value* x = g->addInput("x");
  const at::Tensor w = at::arange(24, at::kFloat).view({2, 3, 4});
  torch::jit::Value* c = g->insertConstant(w);
  torch::jit::Value* p = g->insert(c10::aten::permute, {c, std::vector<int64_t>{2, 0, 1}});
  torch::jit::Value* v = g->insert(c10::aten::transpose, {p, 0, 1});
  g->registerOutput(g->insert(c10::aten::add, {v, x}));
  ASSERT_TRUE(isConstantTensor(v));
  auto value = evaluateConstant(v);
  ASSERT_TRUE(value.has_value());
  EXPECT_TRUE(at::equal(*value, w.permute({2, 0, 1}).transpose(0, 1)));
  EXPECT_FALSE(value->is_contiguous());
  auto stored = relayoutForContiguous(v);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->sizes(), w.sizes());
  EXPECT_TRUE(at::equal(*stored, w)); // the same values...
  EXPECT_FALSE(stored->is_contiguous());
  EXPECT_TRUE(stored->permute({2, 0, 1}).transpose(0, 1).is_contiguous()); // ...laid out anew
  // An input is not a constant; nor is a constant something else reads too (one layout each).
  EXPECT_FALSE(isConstantTensor(g->insert(c10::aten::t, {x})));
  g->insert(c10::aten::relu, {c});
  EXPECT_FALSE(isConstantTensor(v));
  EXPECT_FALSE(relayoutForContiguous(v).has_value());
}

// A frozen model's linear: the weight is a constant, so a sync on its transpose stores the
// weight column-major, once; the linear stays matmul + add (within float rounding: the wheel's
// MKL multiplies by a column-major weight in another order than by its transposed view, where
// Debian's OpenBLAS gave the same bits), and a second pass finds the decision already applied.
TEST(ConstantTensors, SyncOnAFrozenWeightStoresItOnce) {
  torch::jit::Module m("m");
  m.register_parameter("w", at::randn({6, 10}), false);
  m.register_parameter("b", at::randn({6}), false);
  m.define(R"JIT(
def forward(self, x):
    return torch.linear(x, self.w, self.b).relu()
)JIT");
  m.eval();
  torch::jit::Module original = torch::jit::freeze(m);
  torch::jit::Module frozen = torch::jit::freeze(m);
  auto g = inlineMethod(frozen, "forward");
  const auto exposed = exposeLinearWeights(*g);
  ASSERT_EQ(exposed.size(), 1u);
  GraphIndex index(*g);
  const auto t = opOf(index, c10::aten::t), mm = opOf(index, c10::aten::matmul);
  ASSERT_GE(t, 0);
  ASSERT_TRUE(isConstantTensor(exposed[0].t->output()));
  auto s = scheduleFor(index);
  s.decisions.push_back(syncOf(index, t, {mm}));
  auto report = applySchedule(g, s);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, ApplyStatus::Applied) << report.results[0].message;
  EXPECT_EQ(restoreLinears(exposed), 0u); // a linear with a weight stored anew stays exposed
  g->lint();
  EXPECT_EQ(static_cast<int>(nodesOf(*g, c10::aten::contiguous).size()), 0);
  const torch::jit::Value* w = exposed[0].t->input(0);
  ASSERT_EQ(w->node()->kind(), c10::prim::Constant);
  EXPECT_TRUE(torch::jit::toIValue(w)->toTensor().t().is_contiguous());
  for (std::uint64_t seed : {1u, 2u}) {
    at::manual_seed(seed);
    const at::Tensor in = at::randn({3, 10});
    const at::Tensor a = original.forward({in}).toTensor(), b = frozen.forward({in}).toTensor();
    EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-6))
        << "seed " << seed << ": " << (a - b).abs().max().item<float>();
  }
  // Again: nothing to do.
  GraphIndex again(*g);
  auto s2 = scheduleFor(again);
  s2.decisions.push_back(
      syncOf(again, opOf(again, c10::aten::t), {opOf(again, c10::aten::matmul)}));
  auto report2 = applySchedule(g, s2);
  ASSERT_EQ(report2.results.size(), 1u);
  EXPECT_EQ(report2.results[0].status, ApplyStatus::AlreadyApplied) << report2.results[0].message;
}

// A conversion fused into its producer: aten::mul writes a row-major buffer through its out
// variant, the consumers read that, results keep their bits, and a second run finds it done.
namespace {

// Applies `s` to `g` (the graph of `m`): its one decision is applied, no aten::contiguous is
// left, the one aten::mul writes row-major itself and feeds the matmul, and `m` gives the bits
// `reference` (not rewritten: a source whose matmul reads the product row-major) gives.
void expectMulFused(const std::shared_ptr<torch::jit::Graph>& g, const formats::Schedule& s,
                    torch::jit::Module& m, torch::jit::Module& reference) {
  auto report = applySchedule(g, s);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, ApplyStatus::Applied) << report.results[0].message;
  EXPECT_TRUE(nodesOf(*g, c10::aten::contiguous).empty()) << graphText(*g);
  auto muls = nodesOf(*g, c10::aten::mul);
  ASSERT_EQ(muls.size(), 1u);
  EXPECT_TRUE(writesRowMajorItself(muls[0]));
  EXPECT_EQ(nodesOf(*g, c10::aten::matmul)[0]->input(0), muls[0]->output());
  auto x = at::randn({4, 32, 16});
  auto k = at::randn({4, 32, 8});
  EXPECT_TRUE(at::equal(m.forward({x, k}).toTensor(), reference.forward({x, k}).toTensor()));
}

} // namespace

TEST(ProducerFusion, APointwiseProducerWritesTheRowMajorValueItself) {
  const char* src = R"JIT(
def forward(self, x, k):
    q = x.transpose(1, 2) * 0.125
    return torch.matmul(q, k)
)JIT";
  auto m = makeModule(src);
  // What the decision asks for: the matmul reads the product row-major. The same bits as the
  // source with that conversion written out; against the source itself, BLAS may sum a
  // transposed operand in another order (OpenBLAS on an AVX-512 EPYC does).
  auto reference = makeModule(R"JIT(
def forward(self, x, k):
    q = (x.transpose(1, 2) * 0.125).contiguous()
    return torch.matmul(q, k)
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  const auto* mul = index.ops()[static_cast<std::size_t>(opOf(index, c10::aten::mul))];
  auto op = outVariantOf(mul);
  ASSERT_TRUE(op);
  EXPECT_EQ(operatorName(*op), "aten::mul.Scalar_out");
  // A transpose is not pointwise: it has no out variant to fuse into.
  EXPECT_FALSE(
      outVariantOf(index.ops()[static_cast<std::size_t>(opOf(index, c10::aten::transpose))]));

  auto s = scheduleFor(index);
  auto d = syncOf(index, opOf(index, c10::aten::mul), {opOf(index, c10::aten::matmul)});
  d.fused_template_input = 0;
  s.decisions.push_back(d);
  expectMulFused(g, s, m, reference);
  const std::string once = graphText(*g);
  auto again = applySchedule(g, s);
  EXPECT_EQ(again.results[0].status, ApplyStatus::AlreadyApplied) << again.results[0].message;
  EXPECT_EQ(graphText(*g), once);
}

// An existing conversion after a pointwise op (`(x.transpose(1, 2) * 0.125).contiguous()`):
// the op writes row-major itself and the conversion goes, with the same bits; a second run
// finds nothing to do. When the op's output is read elsewhere too, nothing is fused.
TEST(ProducerFusion, AnExistingConversionAfterAPointwiseOpIsFusedIntoIt) {
  const char* src = R"JIT(
def forward(self, x, k):
    q = (x.transpose(1, 2) * 0.125).contiguous()
    return torch.matmul(q, k)
)JIT";
  auto m = makeModule(src);
  auto reference = makeModule(src);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  auto d = removeFirstConversion(index);
  d.fused_template_input = 0;
  s.decisions.push_back(d);
  expectMulFused(g, s, m, reference);
  const std::string once = graphText(*g);
  auto again = applySchedule(g, s);
  EXPECT_NE(again.results.at(0).status, ApplyStatus::Applied);
  EXPECT_EQ(graphText(*g), once);

  auto shared = makeModule(R"JIT(
def forward(self, x, k):
    p = x.transpose(1, 2) * 0.125
    q = p.contiguous()
    return torch.matmul(q, k), p.sum()
)JIT");
  auto h = inlineMethod(shared, "forward");
  GraphIndex hindex(*h);
  auto t = scheduleFor(hindex);
  auto e = removeFirstConversion(hindex);
  e.fused_template_input = 0;
  t.decisions.push_back(e);
  auto skipped = applySchedule(h, t);
  EXPECT_EQ(skipped.results.at(0).status, ApplyStatus::Skipped) << skipped.results[0].message;
  EXPECT_EQ(nodesOf(*h, c10::aten::contiguous).size(), 1u);
}

// The producer's output read by an op the decision does not list: it keeps its own layout, and
// the conversion stays separate.
TEST(ProducerFusion, AnOutputReadElsewhereIsConvertedSeparately) {
  auto m = makeModule(R"JIT(
def forward(self, x, k):
    q = x.transpose(1, 2) * 0.125
    return torch.matmul(q, k), q.sum()
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  auto d = syncOf(index, opOf(index, c10::aten::mul), {opOf(index, c10::aten::matmul)});
  d.fused_template_input = 0;
  s.decisions.push_back(d);
  auto report = applySchedule(g, s);
  EXPECT_EQ(report.results.at(0).status, ApplyStatus::Applied) << report.results[0].message;
  EXPECT_EQ(nodesOf(*g, c10::aten::contiguous).size(), 1u);
  EXPECT_FALSE(writesRowMajorItself(nodesOf(*g, c10::aten::mul).at(0)));
}
