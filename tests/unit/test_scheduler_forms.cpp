// The forms xsched plans for: async conversions in idle windows (the fast form only), and what
// a fresh output adds to a conversion's cost.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"
#include "xalloc/scheduler/decide.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::scheduler;
using xalloc::testing::Fixture;

TEST(Scheduler, AsyncHidesTheConversionInAnIdleWindow) {
  auto withWindow = [](std::int64_t after, std::int64_t before, double ms) {
    Fixture f;
    f.p.gpu_idle_events.push_back(Fixture::window(after, before, ms));
    return f;
  };
  SchedOptions fast; // only the runtime (xrewrite --form fast) converts on a side worker
  fast.form = formats::RewriteForm::Fast;
  Fixture plain;
  const Schedule sync_plan = makeSchedule(plain.p, plain.cost, fast);
  ASSERT_EQ(plain.decisionFor(sync_plan, 10).action, Action::Sync);

  // A 0.5 ms gap between the producer (op 0) and the first consumer (op 1): the 0.1 ms
  // conversion fits (0.9 * 0.5 ms) and leaves only the hand-off on the critical path.
  Fixture f = withWindow(0, 1, 0.5);
  const Schedule s = makeSchedule(f.p, f.cost, fast);
  const Decision& d = f.decisionFor(s, 10);
  ASSERT_EQ(d.action, Action::Async) << d.reason;
  EXPECT_EQ(d.window_id, 7);
  EXPECT_TRUE(s.summary.optimal);
  EXPECT_EQ(s.summary.form, formats::RewriteForm::Fast);
  // The portable form (the default) writes aten::contiguous only: no async, whatever the windows.
  const Schedule portable = makeSchedule(f.p, f.cost);
  EXPECT_EQ(portable.summary.form, formats::RewriteForm::Portable);
  EXPECT_EQ(portable.summary.tolerance, formats::kDefaultTolerance); // the plan says its tolerance
  EXPECT_EQ(f.decisionFor(portable, 10).action, Action::Sync);
  SchedOptions defaults;
  EXPECT_NEAR(sync_plan.summary.predicted_time_after_ms - s.summary.predicted_time_after_ms,
              0.1 - defaults.async_overhead_ms, 1e-9);
  const std::string trace = planTraceJson(s);
  EXPECT_NE(trace.find("side worker"), std::string::npos);
  EXPECT_NE(trace.find("%v float32[64,64]"), std::string::npos);

  // Too small once the safety factor is applied (0.9 * 0.105 < 0.1): sync instead.
  Fixture small = withWindow(0, 1, 0.105);
  EXPECT_EQ(small.decisionFor(makeSchedule(small.p, small.cost, fast), 10).action, Action::Sync);
  SchedOptions generous = fast;
  generous.window_safety = 1.0;
  EXPECT_EQ(small.decisionFor(makeSchedule(small.p, small.cost, generous), 10).action,
            Action::Async);
  // After the first consumer has started: too late.
  Fixture late = withWindow(1, 2, 5.0);
  EXPECT_EQ(late.decisionFor(makeSchedule(late.p, late.cost, fast), 10).action, Action::Sync);
  // Async switched off.
  SchedOptions no_async = fast;
  no_async.allow_async = false;
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost, no_async), 10).action, Action::Sync);
  // A hand-off that costs more than the conversion: sync is better.
  SchedOptions slow_handoff = fast;
  slow_handoff.async_overhead_ms = 0.2;
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost, slow_handoff), 10).action, Action::Sync);
}

// A C++ program's run is one run: a site's cost and savings add up over its calls. A weight
// transposed once before a loop and read at each of its 4 steps by both consumers saves at
// every read; made at 3 calls, it costs 3 conversions.
TEST(Scheduler, AProgramsValueSavesAtEveryReadAndCostsAtEveryCall) {
  Fixture f;
  f.p.model.format = formats::ModelFormat::LibtorchProgram;
  for (auto& c : f.v().consumers) {
    c.reads = 4;
    f.p.ops[static_cast<std::size_t>(c.op_id)].duration_ms = 4.0; // its 4 calls in the run
  }
  Schedule s = makeSchedule(f.p, f.cost);
  const Decision& once = f.decisionFor(s, 10);
  ASSERT_EQ(once.action, Action::Sync) << once.reason;
  EXPECT_NEAR(once.predicted_saving_ms, 2 * 4 * 0.3, 1e-9);
  EXPECT_NEAR(once.predicted_cost_ms, 0.1, 1e-9);
  EXPECT_NE(once.reason.find("(made once and read 8 times in the program's run)"),
            std::string::npos)
      << once.reason;
  f.p.ops[0].runs = 3;
  s = makeSchedule(f.p, f.cost);
  EXPECT_NEAR(f.decisionFor(s, 10).predicted_cost_ms, 0.3, 1e-9);
  EXPECT_NE(f.decisionFor(s, 10).reason.find("(made 3 times and read 8 times"), std::string::npos);

  // Idle windows are moments of one call: each of the 3 conversions (0.1 ms) fits a 0.2 ms
  // window on its own, though the 3 together would not; each pays the hand-off.
  f.p.gpu_idle_events.push_back(Fixture::window(0, 1, 0.2));
  SchedOptions fast;
  fast.form = formats::RewriteForm::Fast;
  s = makeSchedule(f.p, f.cost, fast);
  ASSERT_EQ(f.decisionFor(s, 10).action, Action::Async) << f.decisionFor(s, 10).reason;
  const Schedule sync_plan = makeSchedule(f.p, f.cost);
  EXPECT_NEAR(sync_plan.summary.predicted_time_after_ms - s.summary.predicted_time_after_ms,
              3 * (0.1 - fast.async_overhead_ms), 1e-9);
}

// aten::contiguous writes a fresh output: above glibc's mmap threshold every call maps and
// faults in new pages (a 37 MiB conversion paid 3.4x its copy). A portable plan counts that;
// the fast form's runtime reuses outputs of 4 MiB and more, so its plan counts it only below.
TEST(Scheduler, PortablePlansPayForAFreshOutput) {
  auto sized = [](std::int64_t rows, double allocation_ms) {
    Fixture f;
    f.v().layout = {{rows, 64}, {1, rows}, 0, "float32", "cpu"};
    f.cost.conversion_cost_table[0].layout = f.v().layout;
    f.cost.conversion_cost_table[0].allocation_ms = allocation_ms;
    f.cost.conversion_cost_table[0].allocation_spread_ms = 0.0;
    return f;
  };
  SchedOptions fast;
  fast.form = formats::RewriteForm::Fast;
  // Consumers gain 0.6 ms together; the copy costs 0.1 ms and its fresh output 0.7 ms more.
  Fixture large = sized(32768, 0.7); // 8 MiB
  Decision d = large.decisionFor(makeSchedule(large.p, large.cost), 10);
  EXPECT_EQ(d.action, Action::None) << d.reason;
  EXPECT_NEAR(d.predicted_cost_ms, 0.8, 1e-9);
  EXPECT_NE(d.reason.find("of which 0.7000 ms for its fresh output"), std::string::npos)
      << d.reason;
  d = large.decisionFor(makeSchedule(large.p, large.cost, fast), 10);
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_NEAR(d.predicted_cost_ms, 0.1, 1e-9);
  // Below 4 MiB the runtime allocates through libtorch as aten::contiguous does.
  Fixture small = sized(4096, 0.7); // 1 MiB
  EXPECT_EQ(small.decisionFor(makeSchedule(small.p, small.cost, fast), 10).action, Action::None);
  // A small fresh-output cost leaves the decision alone and is counted in the prediction.
  Fixture cheap = sized(32768, 0.05);
  const Schedule s = makeSchedule(cheap.p, cheap.cost);
  d = cheap.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_NEAR(d.predicted_cost_ms, 0.15, 1e-9);
  EXPECT_NE(d.reason.find("of which 0.0500 ms for its fresh output"), std::string::npos)
      << d.reason;
}
