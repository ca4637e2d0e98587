// GraphRunner: the values a run keeps, for the ops measured on them later.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "graph_lookup.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/tspass/graph_utils.h"

using namespace xalloc;
using tspass::testing::opOf;
using tspass::testing::outputOf;

namespace {
c10::IValue tensorList(const std::vector<at::Tensor>& ts) {
  c10::impl::GenericList l(c10::TensorType::get());
  for (const auto& t : ts)
    l.push_back(t);
  return l;
}
} // namespace

// A loop over feature maps of falling size (an FPN head) kept its last, smallest trip: RetinaNet's
// head permute showed 3x3 positions of a level that has 40x40, so its conversion looked free. A
// run that keeps values now keeps every body value from the trip with the most tensor bytes,
// all from that one trip (so an op re-run on them gets inputs that belong together).
TEST(GraphRunner, ALoopKeepsTheValuesOfItsHeaviestTrip) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m("M", cu, /*shouldMangle=*/true);
  m.define(R"JIT(
def forward(self, xs: List[Tensor]):
    outs: List[Tensor] = []
    for x in xs:
        y = x.t()
        outs.append(y + 1.0)
    return outs
)JIT");
  auto graph = tspass::inlineMethod(m, "forward");
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  const torch::jit::Value* y = outputOf(index, c10::aten::t);
  const torch::jit::Value* sum = outputOf(index, c10::aten::add);
  const auto loop_id = opOf(index, c10::prim::Loop);
  ASSERT_GE(loop_id, 0);
  const torch::jit::Value* trip =
      index.ops()[static_cast<std::size_t>(loop_id)]->blocks()[0]->inputs()[0];

  const std::vector<at::Tensor> xs{at::randn({8, 4}), at::randn({64, 32}), at::randn({2, 2})};
  profiler::GraphRunner::Trace trace;
  auto out = runner.run({m._ivalue(), tensorList(xs)}, {true, false, false}, &trace);
  EXPECT_EQ(runner.valueOf(trace, trip).toInt(), 1);
  EXPECT_TRUE(runner.valueOf(trace, y).toTensor().equal(xs[1].t()));
  EXPECT_TRUE(runner.valueOf(trace, sum).toTensor().equal(xs[1].t() + 1.0));
  EXPECT_EQ(trace.op_runs[static_cast<std::size_t>(opOf(index, c10::aten::t))], 3);
  const auto outs = out.at(0).toListRef();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(outs[2].toTensor().equal(xs[2].t() + 1.0)) << "the loop's results are untouched";
  // What the trips made together, for the profile's runs_by_bytes: every trip's bytes, though
  // only the heaviest trip's value is kept.
  EXPECT_EQ(trace.bytes_made.at(y), (8 * 4 + 64 * 32 + 2 * 2) * 4);
  EXPECT_EQ(trace.bytes_made.at(sum), (8 * 4 + 64 * 32 + 2 * 2) * 4);

  // Trips of equal size: the last one, as before.
  const std::vector<at::Tensor> same{at::randn({4, 4}), at::randn({4, 4})};
  profiler::GraphRunner::Trace t2;
  runner.run({m._ivalue(), tensorList(same)}, {true, false, false}, &t2);
  EXPECT_EQ(runner.valueOf(t2, trip).toInt(), 1);
  EXPECT_TRUE(runner.valueOf(t2, y).toTensor().equal(same[1].t()));
  EXPECT_EQ(t2.bytes_made.at(y), 2 * 4 * 4 * 4); // counted per run, not carried over
}

// SSD's head picks one branch per feature level inside its loop: the heaviest trip took one of
// them, and the others' values were lost, so their regions could not be measured. Each branch
// keeps what its ops read and made on the trip that took it, and a value asked for in that
// branch is that one; elsewhere the heaviest trip's.
TEST(GraphRunner, ABranchInALoopKeepsTheValuesOfTheTripThatTookIt) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m("M", cu, /*shouldMangle=*/true);
  m.define(R"JIT(
def forward(self, xs: List[Tensor]):
    outs: List[Tensor] = []
    for i in range(len(xs)):
        x = xs[i] * 2.0
        if i == 0:
            y = torch.relu(x)
        else:
            y = torch.sigmoid(x)
        outs.append(y)
    return outs
)JIT");
  auto graph = tspass::inlineMethod(m, "forward");
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  const torch::jit::Value* x = outputOf(index, c10::aten::mul);
  const torch::jit::Value* relu = outputOf(index, c10::aten::relu);
  const torch::jit::Value* sigmoid = outputOf(index, c10::aten::sigmoid);
  const std::vector<at::Tensor> xs{at::randn({2, 2}), at::randn({16, 16})}; // trip 1 heavier
  profiler::GraphRunner::Trace trace;
  runner.run({m._ivalue(), tensorList(xs)}, {true, false, false}, &trace);
  const torch::jit::Block* first = relu->node()->owningBlock();
  const torch::jit::Block* second = sigmoid->node()->owningBlock();
  ASSERT_TRUE(runner.hasValue(trace, relu, first)) << "the branch trip 0 took";
  EXPECT_TRUE(runner.valueOf(trace, relu, first).toTensor().equal(at::relu(xs[0] * 2.0)));
  EXPECT_TRUE(runner.valueOf(trace, x, first).toTensor().equal(xs[0] * 2.0));
  EXPECT_TRUE(runner.valueOf(trace, x, second).toTensor().equal(xs[1] * 2.0));
  EXPECT_TRUE(runner.valueOf(trace, x).toTensor().equal(xs[1] * 2.0)); // the heaviest trip's
}
