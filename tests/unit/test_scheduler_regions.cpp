// xsched's region decisions: a region runs in its fastest measured layout among those within
// the tolerance, the form and the noise, as a whole; value decisions inside it give way.
#include <gtest/gtest.h>

#include "xalloc/formats/documents.h"
#include "xalloc/scheduler/decide.h"

#include "scheduler_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using xalloc::scheduler::makeSchedule;
using xalloc::scheduler::SchedOptions;

namespace {

RegionCandidate measured(LayoutTarget t, bool packed, double ms, double as_is_ms,
                         std::optional<double> error = std::nullopt) {
  RegionCandidate c;
  c.layout = layoutTraits(t, packed);
  c.measured = true;
  c.time_ms = ms;
  c.spread_ms = 0.01;
  if (t != LayoutTarget::Contiguous || packed) {
    c.delta_ms = ms - as_is_ms;
    c.delta_spread_ms = 0.01;
  }
  c.identical_output = !error;
  c.output_error = error;
  return c;
}

// The fixture's profile with one region over ops 1 and 2 (the two consumers of the transpose),
// as it is in 10 ms, channels-last 8 ms (bit-identical), packed 5 ms (outputs move 3e-7),
// blocked 12 ms.
xalloc::testing::Fixture withRegion() {
  xalloc::testing::Fixture f;
  f.p.model.frozen = true; // regions are planned for a model profiled frozen
  Region g;
  g.ref.id = 0;
  g.ref.convolutions = 2;
  g.ref.nodes = {f.p.ops[1].anchor, f.p.ops[2].anchor};
  g.entries = {f.p.records[0].layout};
  g.exits = {f.p.records[0].layout};
  g.candidates = {measured(LayoutTarget::Contiguous, false, 10, 10),
                  measured(LayoutTarget::ChannelsLast, false, 8, 10),
                  measured(LayoutTarget::ChannelsLast, true, 5, 10, 3e-7),
                  measured(LayoutTarget::Blocked, false, 12, 10)};
  f.p.regions.push_back(g);
  return f;
}

const Decision& regionDecision(const Schedule& s) {
  for (const auto& d : s.decisions)
    if (d.region)
      return d;
  throw std::runtime_error("no region decision");
}

} // namespace

TEST(SchedulerRegions, FastestWithinTheToleranceAndTheFormWins) {
  xalloc::testing::Fixture f = withRegion();
  SchedOptions o;
  o.form = RewriteForm::Fast;
  Schedule s = makeSchedule(f.p, f.cost, o);
  const Decision& d = regionDecision(s);
  EXPECT_EQ(d.action, Action::Sync);
  EXPECT_EQ(d.target, LayoutTarget::ChannelsLast);
  EXPECT_TRUE(d.region_layout->packed);
  EXPECT_DOUBLE_EQ(d.predicted_saving_ms, 5.0);
  ASSERT_TRUE(d.region);
  EXPECT_EQ(d.region->nodes.size(), 2u);
  EXPECT_NE(d.reason.find("channels_last+packed"), std::string::npos) << d.reason;
  // The region's gain is in the plan's prediction.
  EXPECT_LE(s.summary.predicted_time_after_ms, s.summary.predicted_time_before_ms - 5.0 + 1e-9);

  // The value decision about the same ops gives way to the region.
  for (const auto& v : s.decisions)
    if (!v.region && v.value_id == 10) {
      EXPECT_EQ(v.action, Action::None);
      EXPECT_NE(v.reason.find("inside layout region 0"), std::string::npos) << v.reason;
    }
}

TEST(SchedulerRegions, PortableFormExactAndNoiseEachRuleOut) {
  xalloc::testing::Fixture f = withRegion();
  // Portable: the packed candidate needs the runtime; channels-last (aten ops only) wins.
  Schedule s = makeSchedule(f.p, f.cost, {});
  EXPECT_EQ(regionDecision(s).target, LayoutTarget::ChannelsLast);
  EXPECT_FALSE(regionDecision(s).region_layout->packed);

  // --exact: only bit-identical candidates.
  SchedOptions exact;
  exact.form = RewriteForm::Fast;
  exact.tolerance = 0;
  s = makeSchedule(f.p, f.cost, exact);
  EXPECT_EQ(regionDecision(s).target, LayoutTarget::ChannelsLast);
  EXPECT_FALSE(regionDecision(s).region_layout->packed);

  // A tolerance tighter than the packed candidate's error rules it out too.
  SchedOptions tight;
  tight.form = RewriteForm::Fast;
  tight.tolerance = 1e-7;
  s = makeSchedule(f.p, f.cost, tight);
  EXPECT_FALSE(regionDecision(s).region_layout->packed);

  // Gains inside the noise: left as it is, saying what was closest.
  f.p.regions[0].candidates.resize(2);
  f.p.regions[0].candidates[1] = measured(LayoutTarget::ChannelsLast, false, 9.8, 10);
  f.p.regions[0].candidates[1].delta_spread_ms = 2.0;
  s = makeSchedule(f.p, f.cost, {});
  EXPECT_EQ(regionDecision(s).action, Action::None);
  EXPECT_EQ(regionDecision(s).target, LayoutTarget::Contiguous);
  EXPECT_NE(regionDecision(s).reason.find("noise"), std::string::npos) << regionDecision(s).reason;
}

TEST(SchedulerRegions, UnfrozenProfileLeavesRegionsAlone) {
  xalloc::testing::Fixture f = withRegion();
  f.p.model.frozen = false;
  SchedOptions o;
  o.form = RewriteForm::Fast;
  const Schedule s = makeSchedule(f.p, f.cost, o);
  const Decision& d = regionDecision(s);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("xprof --freeze"), std::string::npos) << d.reason;
  // The value decisions stand: no region takes their ops.
  for (const auto& v : s.decisions) {
    if (!v.region) {
      EXPECT_EQ(v.reason.find("inside layout region"), std::string::npos) << v.reason;
    }
  }
}

TEST(SchedulerRegions, UnmeasuredRegionIsLeftWithItsNote) {
  xalloc::testing::Fixture f = withRegion();
  f.p.regions[0].note = "a path leaves the region and comes back into it";
  for (auto& c : f.p.regions[0].candidates)
    c.measured = false;
  SchedOptions o;
  o.form = RewriteForm::Fast;
  const Decision d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("comes back"), std::string::npos) << d.reason;
}

namespace {
// The fixture at another input shape: the same region, its candidates at other times.
Profile atShape(const xalloc::testing::Fixture& f, std::int64_t batch,
                std::vector<RegionCandidate> candidates) {
  Profile q = f.p;
  for (auto& in : q.settings.inputs)
    in.shape.front() = batch;
  q.regions.front().candidates = std::move(candidates);
  return q;
}
} // namespace

TEST(SchedulerRegions, OverSeveralShapesALayoutMustHoldAtEach) {
  xalloc::testing::Fixture f = withRegion();
  InputSpec x;
  x.name = "x";
  x.shape = {1, 3, 32, 32};
  f.p.settings.inputs = {x};
  const std::string one = scheduler::inputShapes(f.p);
  SchedOptions o;
  o.form = RewriteForm::Fast;
  // At batch 8 packed is slower than the region as it is (blocked is the fastest there, but
  // slower at the first shape): channels_last, faster at both, is what holds.
  std::vector<Profile> others{atShape(f, 8,
                                      {measured(LayoutTarget::Contiguous, false, 80, 80),
                                       measured(LayoutTarget::ChannelsLast, false, 70, 80),
                                       measured(LayoutTarget::ChannelsLast, true, 90, 80, 3e-7),
                                       measured(LayoutTarget::Blocked, false, 50, 80)})};
  o.other_shapes = &others;
  const std::string eight = scheduler::inputShapes(others.front());
  ASSERT_NE(one, eight);
  Decision d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::Sync);
  EXPECT_EQ(d.region_layout->name, std::string("channels_last")) << d.reason;
  EXPECT_EQ(d.holds_for, (std::vector<std::string>{one, eight}));
  EXPECT_NE(d.reason.find(eight + " 80.0000 ms -> 70.0000 ms"), std::string::npos) << d.reason;
  EXPECT_DOUBLE_EQ(d.predicted_saving_ms, 2.0); // at the profile's own shape

  // The region's decision and the shapes survive the schedule's JSON.
  Schedule s = makeSchedule(f.p, f.cost, o);
  const Schedule back = scheduleFromJson(toJson(s), "s.json");
  EXPECT_EQ(regionDecision(back).holds_for, d.holds_for);

  // Every layout slower somewhere, or faster nowhere: left as it is, saying why.
  others = {atShape(f, 8,
                    {measured(LayoutTarget::Contiguous, false, 80, 80),
                     measured(LayoutTarget::ChannelsLast, false, 95, 80),
                     measured(LayoutTarget::ChannelsLast, true, 90, 80, 3e-7),
                     measured(LayoutTarget::Blocked, false, 120, 80)})};
  d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::None);
  EXPECT_TRUE(d.holds_for.empty());
  EXPECT_NE(d.reason.find("is slower at " + eight), std::string::npos) << d.reason;

  // A shape whose profile lacks the region (another graph) cannot vouch for any layout.
  others.front().regions.clear();
  d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("is not a region at " + eight), std::string::npos) << d.reason;

  // One profile: as before, the fastest at its shape, and no shapes recorded.
  o.other_shapes = nullptr;
  d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_TRUE(d.region_layout->packed);
  EXPECT_TRUE(d.holds_for.empty());
}
