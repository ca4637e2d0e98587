// tspass/linear.h: aten::linear exposed as t + matmul + add computes the same bits, keeps the
// linear's source, and goes back to the very same graph when nothing converted it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

using namespace xalloc;
using namespace xalloc::tspass;

namespace {

// Three linears: a 3-D contiguous input with a bias (PyTorch's fused addmm path), a transposed
// (non-contiguous) input without one, and a 2-D input inside a branch.
const char* kLinears = R"JIT(
def forward(self, x, z, flag: bool):
    a = torch.linear(x, self.w, self.b)
    c = torch.linear(z.transpose(1, 2), self.w, None)
    if flag:
        d = torch.linear(x[0], self.w, self.b)
    else:
        d = x[0]
    return a, c, d
)JIT";

torch::jit::Module linearModule() {
  torch::jit::Module m("m");
  at::manual_seed(7);
  m.register_parameter("w", at::randn({24, 32}) * 0.1, false);
  m.register_parameter("b", at::randn({24}), false);
  m.define(kLinears);
  return m;
}

std::vector<c10::IValue> inputs(std::uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({4, 16, 32}), at::randn({4, 32, 16}), true};
}

bool sameBits(const c10::IValue& a, const c10::IValue& b) {
  const auto& ea = a.toTupleRef().elements();
  const auto& eb = b.toTupleRef().elements();
  if (ea.size() != eb.size())
    return false;
  for (std::size_t i = 0; i < ea.size(); ++i) {
    const at::Tensor x = ea[i].toTensor().contiguous(), y = eb[i].toTensor().contiguous();
    if (x.sizes() != y.sizes() ||
        std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) != 0)
      return false;
  }
  return true;
}

int count(torch::jit::Block* block, c10::Symbol kind) {
  int n = 0;
  for (torch::jit::Node* node : block->nodes()) {
    n += node->kind() == kind;
    for (torch::jit::Block* b : node->blocks())
      n += count(b, kind);
  }
  return n;
}

} // namespace

TEST(ExposeLinear, ComputesTheSameBitsAsTheLinear) {
  auto original = linearModule();
  auto edited = linearModule();
  auto g = inlineMethod(edited, "forward");
  const auto exposed = exposeLinearWeights(*g);
  ASSERT_EQ(exposed.size(), 3u);
  EXPECT_EQ(count(g->block(), c10::aten::linear), 0);
  EXPECT_EQ(count(g->block(), c10::aten::matmul), 3);
  EXPECT_EQ(count(g->block(), c10::aten::add), 2); // the linear without a bias has no add
  EXPECT_EQ(exposed[1].add, nullptr);
  for (std::uint64_t seed : {1u, 2u, 3u})
    EXPECT_TRUE(sameBits(original.forward(inputs(seed)), edited.forward(inputs(seed))))
        << "seed " << seed;
}

TEST(ExposeLinear, NewOpsKeepTheLinearsSource) {
  auto m = linearModule();
  auto g = inlineMethod(m, "forward");
  exposeLinearWeights(*g);
  GraphIndex index(*g);
  int seen = 0;
  for (std::size_t i = 0; i < index.ops().size(); ++i) {
    const auto& a = index.anchor(static_cast<std::int64_t>(i));
    if (a.op == "aten::t" || a.op == "aten::matmul") {
      EXPECT_EQ(a.expr.rfind("torch.linear(", 0), 0u) << a.op << " reads `" << a.expr << "`";
      ++seen;
    }
  }
  EXPECT_EQ(seen, 6);
}

TEST(ExposeLinear, UntouchedLinearsComeBackAsTheSameGraph) {
  auto m = linearModule();
  auto g = inlineMethod(m, "forward");
  const std::string before = graphText(*g);
  const auto exposed = exposeLinearWeights(*g);
  EXPECT_NE(graphText(*g), before);
  EXPECT_EQ(restoreLinears(exposed), 3u);
  EXPECT_EQ(graphText(*g), before);
  g->lint();
}

// A linear whose output has only a number (its result feeds another op directly, as in
// `gelu(self.c_fc(x))` once a saved model is loaded back): the restored linear gets a new number,
// and the printed graph names it by the old one again, so a rewrite that converts nothing shows
// an empty diff. (The cli.pipeline test failed now and then on MinimalGPT when a schedule
// left such a linear alone.)
TEST(ExposeLinear, NumberedOutputsPrintUnderTheirOldNumberAfterARestore) {
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor, %w : Tensor, %b : Tensor):
  %3 : Tensor = aten::linear(%x, %w, %b)
  %4 : Tensor = aten::relu(%3)
  %y : Tensor = aten::linear(%4, %w, %b)
  return (%y))IR",
                      g.get());
  g->outputs()[0]->setDebugName("y"); // the parser numbers every value
  const std::string before = graphText(*g);
  const auto exposed = exposeLinearWeights(*g);
  std::vector<Renumbered> renumbered;
  EXPECT_EQ(restoreLinears(exposed, &renumbered), 2u);
  g->lint();
  ASSERT_EQ(renumbered.size(), 1u); // %y kept its name
  EXPECT_NE(renumbered[0].now, renumbered[0].before);
  EXPECT_NE(graphText(*g), before);
  EXPECT_EQ(withOriginalNumbers(graphText(*g), renumbered), before);
  // Whole names only.
  EXPECT_EQ(withOriginalNumbers("%12 = f(%123, %12.1, %12)\n", {{"12", "7"}}),
            "%7 = f(%123, %12.1, %7)\n");
  EXPECT_EQ(withOriginalNumbers("%12 = f(%x)", {}), "%12 = f(%x)");
}

TEST(ExposeLinear, ConvertedWeightStaysExposedConvertedInputGoesBack) {
  auto original = linearModule();
  auto m = linearModule();
  auto g = inlineMethod(m, "forward");
  const auto exposed = exposeLinearWeights(*g);
  // The first linear's transposed weight made contiguous; the second's input x made contiguous.
  torch::jit::Node* mm0 = exposed[0].matmul;
  mm0->replaceInput(1, insertContiguous(mm0->input(1), mm0, mm0));
  torch::jit::Node* mm1 = exposed[1].matmul;
  mm1->replaceInput(0, insertContiguous(mm1->input(0), mm1, mm1));
  EXPECT_EQ(restoreLinears(exposed), 2u);
  g->lint();
  EXPECT_EQ(count(g->block(), c10::aten::linear), 2);
  EXPECT_EQ(count(g->block(), c10::aten::matmul), 1);
  EXPECT_EQ(count(g->block(), c10::aten::contiguous), 2);
  // The restored second linear reads the converted input.
  bool reads_converted = false;
  for (torch::jit::Node* n : g->nodes())
    if (n->kind() == c10::aten::linear)
      reads_converted |= n->input(0)->node()->kind() == c10::aten::contiguous;
  EXPECT_TRUE(reads_converted);
  // The same computation; the bits only where the BLAS reads a contiguous and a transposed
  // weight in the same order (the reference BLAS does, OpenBLAS does not).
  for (std::uint64_t seed : {4u, 5u})
    EXPECT_LE(maxRelativeError(original.forward(inputs(seed)), m.forward(inputs(seed))), 1e-5);
}

TEST(ExposeLinear, OptionalBiasIsLeftAlone) {
  torch::jit::Module m("m");
  m.register_parameter("w", at::randn({8, 8}), false);
  m.define(R"JIT(
def forward(self, x, b: Optional[Tensor]):
    return torch.linear(x, self.w, b)
)JIT");
  auto g = inlineMethod(m, "forward");
  EXPECT_TRUE(exposeLinearWeights(*g).empty());
  EXPECT_EQ(count(g->block(), c10::aten::linear), 1);
}
