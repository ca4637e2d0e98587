// Consumer timings: measured now or from the database, and measured again when a slow moment of
// the machine disturbed them, keeping the quieter of the two.
#include <memory>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>

#include "graph_lookup.h"
#include "xalloc/profiler/consumers.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/tspass/graph_utils.h"

using namespace xalloc;
using tspass::testing::opOf;
using tspass::testing::outputOf;

TEST(Consumers, DisturbedMeansASpreadBeyondEightPercentOfTheOp) {
  formats::ConsumerTiming c;
  c.measured = true;
  c.time_as_is_ms = 2.0;
  c.delta_spread_ms = 0.1; // 5%: quiet
  EXPECT_FALSE(profiler::disturbed(c));
  c.delta_spread_ms = 0.2; // 10%
  EXPECT_TRUE(profiler::disturbed(c));
  c.time_as_is_ms = 0.04; // under 50 us: the timer's grain, left to xsched's margin
  c.delta_spread_ms = 0.02;
  EXPECT_FALSE(profiler::disturbed(c));
  c.measured = false;
  c.time_as_is_ms = 2.0;
  c.delta_spread_ms = 1.0;
  EXPECT_FALSE(profiler::disturbed(c));
}

TEST(Consumers, MeasuredAgainOnlyAQuieterTimingReplacesTheFirst) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m("M", cu, /*shouldMangle=*/true);
  m.define("def forward(self, x, w):\n    return torch.mm(x.t(), w)\n");
  auto graph = tspass::inlineMethod(m, "forward");
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  profiler::GraphRunner::Trace trace;
  runner.run({m._ivalue(), at::randn({256, 128}), at::randn({256, 64})}, {true, false, false},
             &trace);
  const torch::jit::Value* v = outputOf(index, c10::aten::t);
  const at::Tensor other = runner.valueOf(trace, v).toTensor().contiguous();
  profiler::ConsumerContext ctx{runner, index, trace, nullptr, 1, 7};

  formats::ConsumerTiming c;
  c.op_id = opOf(index, c10::aten::mm);
  ASSERT_GE(c.op_id, 0);
  EXPECT_TRUE(profiler::measureConsumer(ctx, v, other, true, c));
  ASSERT_TRUE(c.measured);
  const double first_ms = c.time_as_is_ms;
  ASSERT_GT(first_ms, 0);

  profiler::ConsumerContext again = ctx;
  again.again = true;
  // A first timing that spread not at all cannot be bettered: it stands.
  formats::ConsumerTiming quiet = c;
  quiet.time_as_is_ms = 123.0;
  quiet.delta_spread_ms = 0.0;
  profiler::measureConsumer(again, v, other, true, quiet);
  EXPECT_EQ(quiet.time_as_is_ms, 123.0);
  EXPECT_EQ(quiet.delta_spread_ms, 0.0);
  // One that spread over a thousand times its own time is replaced by the new measurement.
  formats::ConsumerTiming noisy = c;
  noisy.time_as_is_ms = 1.0;
  noisy.delta_spread_ms = 1000.0;
  profiler::measureConsumer(again, v, other, true, noisy);
  EXPECT_NE(noisy.time_as_is_ms, 1.0);
  EXPECT_LT(noisy.delta_spread_ms.value_or(1e9), 1000.0);
}
