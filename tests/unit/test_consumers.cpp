// Consumer timings: measured now or from the database, and measured again when a slow moment of
// the machine disturbed them, keeping the quieter of the two.
#include <algorithm>
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

// A transpose of a value made contiguous re-strides its output: the transpose itself cannot
// tell, what reads its output can. The matmul after it is re-run with the output the
// contiguous value gives, and is where the change shows (the hidden copy of matmul's reshape).
TEST(Consumers, WhatRunsAfterAConsumerWhoseOutputChangesLayoutIsMeasuredWithThatOutput) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m("M", cu, /*shouldMangle=*/true);
  m.define("def forward(self, x, q):\n"
           "    k = x.view(2, 64, 4, 32).transpose(1, 2)\n"
           "    kt = k.transpose(-2, -1)\n"
           "    return torch.matmul(q, kt), kt.size(0)\n");
  auto graph = tspass::inlineMethod(m, "forward");
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  profiler::GraphRunner::Trace trace;
  // x is a strided slice (as split makes it): its view keeps the row stride of 3 * 128.
  const at::Tensor big = at::randn({2, 64, 384});
  runner.run({m._ivalue(), big.narrow(2, 128, 128), at::randn({2, 4, 64, 32})},
             {true, false, false}, &trace);
  // k: the first transpose's output, not contiguous; its consumer is the second transpose.
  const torch::jit::Node* first = nullptr;
  for (const torch::jit::Node* n : index.ops())
    if (n->kind() == c10::aten::transpose && !first)
      first = n;
  ASSERT_NE(first, nullptr);
  const torch::jit::Value* k = first->output();
  const at::Tensor other = runner.valueOf(trace, k).toTensor().contiguous();
  profiler::ConsumerContext ctx{runner, index, trace, nullptr, 1, 5};
  formats::ConsumerTiming c;
  c.op_id = index.opId(k->uses().front().user);
  ASSERT_EQ(index.ops()[static_cast<std::size_t>(c.op_id)]->kind(), c10::aten::transpose);
  profiler::measureConsumer(ctx, k, other, true, c);
  ASSERT_TRUE(c.measured) << c.note;
  EXPECT_FALSE(c.same_output_layout);
  // The transpose's output is read by the matmul and by aten::size: both followed, the matmul
  // timed with the other output in place, aten::size left unmeasured (it reads no data).
  ASSERT_EQ(c.downstream.size(), 2u);
  const formats::ConsumerTiming* mm = nullptr;
  for (const auto& d : c.downstream)
    if (index.ops()[static_cast<std::size_t>(d.op_id)]->kind() == c10::aten::matmul)
      mm = &d;
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->measured) << mm->note;
  EXPECT_EQ(mm->input_index, 1);
  EXPECT_TRUE(mm->time_contiguous_ms.has_value());
  EXPECT_TRUE(mm->same_output_layout);
  EXPECT_TRUE(mm->downstream.empty());
  // The matmul's result is the same computation either way (its bits may differ only by the
  // order its kernel sums in).
  EXPECT_TRUE(mm->identical_output || mm->output_error.value_or(1.0) < 1e-5);
  // A consumer whose output keeps its layout is not followed.
  formats::ConsumerTiming direct;
  direct.op_id = index.opId(
      std::find_if(index.ops().begin(), index.ops().end(),
                   [](const torch::jit::Node* n) { return n->kind() == c10::aten::matmul; })
          .
          operator*());
  const torch::jit::Value* kt = index.ops()[static_cast<std::size_t>(c.op_id)]->output();
  profiler::measureConsumer(ctx, kt, runner.valueOf(trace, kt).toTensor().contiguous(), true,
                            direct);
  EXPECT_TRUE(direct.measured) << direct.note;
  EXPECT_TRUE(direct.downstream.empty());
}
