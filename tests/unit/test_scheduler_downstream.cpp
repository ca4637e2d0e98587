// What runs after a consumer whose output changes layout (ConsumerTiming::downstream): a value
// read by a transpose whose output a matmul reads. Made contiguous, the value gives the
// transpose another output layout; the matmul re-run with that output is where the gain is.
#include <gtest/gtest.h>

#include "xalloc/formats/documents.h"
#include "xalloc/scheduler/decide.h"

#include "scheduler_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::scheduler;
using xalloc::testing::Fixture;
using xalloc::testing::verdictFor;

namespace {

// The fixture with value 10 read only by op 1, now a transpose (its own time the same either
// way, its output layout another), whose output (value 12, as strided as 10) op 2 reads.
Fixture throughATranspose(double matmul_as_is, double matmul_after_conversion) {
  Fixture f;
  f.p.ops[1].kind = "aten::transpose";
  f.p.ops[1].inputs = {10};
  f.p.ops[1].outputs = {12};
  f.p.ops[2].inputs = {12};
  ConsumerTiming t = Fixture::consumer(1, 0.001, 0.001);
  t.same_output_layout = false;
  ConsumerTiming m = Fixture::consumer(2, matmul_as_is, matmul_after_conversion);
  t.downstream.push_back(m);
  f.v().consumers = {t};
  Record out; // the transpose's output: op 2's input
  out.id = 12;
  out.name = "vt";
  out.producer_op = 1;
  out.layout = f.v().layout;
  out.contiguous = false;
  out.bytes = out.storage_bytes = f.v().bytes;
  out.storage_id = 0;
  out.first_use = 1;
  out.last_use = 2;
  out.consumers = {Fixture::consumer(2, matmul_as_is, matmul_as_is)}; // its own: no gain
  f.p.records.push_back(out);
  return f;
}

} // namespace

TEST(SchedulerDownstream, AConversionIsWeighedByWhatRunsAfterAConsumerThatReStridesIt) {
  Fixture f = throughATranspose(1.0, 0.5);
  const Schedule s = makeSchedule(f.p, f.cost);
  const Decision& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_EQ(d.consumers, (std::vector<std::int64_t>{1})); // the transpose reads the copy
  EXPECT_NEAR(d.predicted_saving_ms, 0.5, 1e-9);          // what the matmul saves
  EXPECT_NE(d.reason.find("measured through what runs after 1 consumer"), std::string::npos)
      << d.reason;
  // The same profile through its document: downstream survives the round trip.
  const Profile back = profileFromJson(toJson(f.p), "p.json");
  ASSERT_EQ(back.records[1].consumers.size(), 1u);
  ASSERT_EQ(back.records[1].consumers[0].downstream.size(), 1u);
  EXPECT_EQ(back.records[1].consumers[0].downstream[0].op_id, 2);
  EXPECT_EQ(f.decisionFor(makeSchedule(back, f.cost), 10).action, Action::Sync);
}

TEST(SchedulerDownstream, WhatWasNotFollowedOrMovesTheBitsIsNotDecided) {
  // Not followed: the output-layout veto stands.
  Fixture none = throughATranspose(1.0, 0.5);
  none.v().consumers[0].downstream.clear();
  SiteVerdict v = verdictFor(none, 10);
  EXPECT_EQ(v.action, Action::None);
  EXPECT_EQ(v.rule, std::string("output-layout"));
  // A consumer of the transpose's output that was not followed (here a second reader).
  Fixture partial = throughATranspose(1.0, 0.5);
  partial.p.records.back().consumers.push_back(Fixture::consumer(3, 1.0, 1.0));
  partial.p.records.back().consumers.back().input_index = 0;
  EXPECT_EQ(verdictFor(partial, 10).rule, std::string("output-layout"));
  // The matmul's bits move beyond the tolerance (or at all under --exact).
  Fixture moved = throughATranspose(1.0, 0.5);
  auto& m = moved.v().consumers[0].downstream[0];
  m.identical_output = false;
  m.output_error = 1e-6;
  EXPECT_EQ(verdictFor(moved, 10).action, Action::Sync); // within the default 1e-4
  SchedOptions exact;
  exact.tolerance = 0;
  EXPECT_EQ(verdictFor(moved, 10, exact).action, Action::None);
  // The matmul's own output changes layout too, and nothing after it was followed.
  Fixture deeper = throughATranspose(1.0, 0.5);
  deeper.v().consumers[0].downstream[0].same_output_layout = false;
  EXPECT_EQ(verdictFor(deeper, 10).rule, std::string("output-layout"));
  // Slower after the transpose: no gain, no edit.
  Fixture slower = throughATranspose(1.0, 1.3);
  EXPECT_EQ(verdictFor(slower, 10).action, Action::None);
}

TEST(SchedulerDownstream, OfTwoConversionsThatServeTheSameOpsTheOneThatGainsMoreIsMade) {
  // The transpose's output is worth converting on its own too (the matmul 0.3 faster), but
  // converting value 10 upstream gains 0.5: both would count the matmul; the upstream one stays.
  Fixture f = throughATranspose(1.0, 0.5);
  f.p.records.back().consumers[0].time_contiguous_ms = 0.7;
  EXPECT_EQ(verdictFor(f, 12).action, Action::Sync); // alone, before the overlap is resolved
  const Schedule s = makeSchedule(f.p, f.cost);
  EXPECT_EQ(f.decisionFor(s, 10).action, Action::Sync);
  const Decision& down = f.decisionFor(s, 12);
  EXPECT_EQ(down.action, Action::None);
  EXPECT_NE(down.reason.find("overlaps the conversion of value 10"), std::string::npos)
      << down.reason;
  // The other way round: the downstream conversion gains more, and the upstream one goes.
  Fixture g = throughATranspose(1.0, 0.8);
  g.p.records.back().consumers[0].time_contiguous_ms = 0.4;
  const Schedule t = makeSchedule(g.p, g.cost);
  EXPECT_EQ(g.decisionFor(t, 10).action, Action::None);
  EXPECT_EQ(g.decisionFor(t, 12).action, Action::Sync);
}
