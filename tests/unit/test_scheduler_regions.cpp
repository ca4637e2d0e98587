// xsched's region decisions: a region runs in its fastest measured layout among those within
// the tolerance, the form and the noise, as a whole; value decisions inside it give way.
#include <gtest/gtest.h>

#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/scheduler/decide.h"

#include "scheduler_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using xalloc::scheduler::explainSchedule;
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

TEST(SchedulerRegions, AModelsWholeRunIsBeforeAndTheArenaSetsWhatAfterKeeps) {
  // xprof timed the model called alone at 40 ms where its ops sum to far less: the allocator's
  // first touches between the ops. Before is that run.
  xalloc::testing::Fixture f = withRegion();
  SchedOptions fast;
  fast.form = RewriteForm::Fast;
  const Schedule ops = makeSchedule(f.p, f.cost, fast);
  EXPECT_FALSE(ops.summary.whole_run);
  f.p.settings.model_run_ms = 40.0;
  const Schedule run = makeSchedule(f.p, f.cost, fast);
  EXPECT_TRUE(run.summary.whole_run);
  EXPECT_DOUBLE_EQ(run.summary.predicted_time_before_ms, 40.0);
  // The packed region needs the runtime, so the rewrite runs from its arena: after is the ops'
  // unit, as without the whole run.
  ASSERT_TRUE(regionDecision(run).region_layout->needs_runtime);
  EXPECT_DOUBLE_EQ(run.summary.predicted_time_after_ms, ops.summary.predicted_time_after_ms);
  EXPECT_NE(explainSchedule(run).find("predicted for the whole run (the model called alone) "
                                      "40.0000 -> "),
            std::string::npos)
      << explainSchedule(run);
  // The portable form runs the region channels-last on ATen's ops, glibc's malloc still under
  // them: after keeps the time between the ops, in proportion to the ops it leaves.
  const Schedule portable_ops = makeSchedule(f.p, f.cost, SchedOptions{});
  f.p.settings.model_run_ms = 0;
  const Schedule portable_sum = makeSchedule(f.p, f.cost, SchedOptions{});
  f.p.settings.model_run_ms = 40.0;
  ASSERT_FALSE(regionDecision(portable_ops).region_layout->needs_runtime);
  const double scale = 40.0 / portable_sum.summary.predicted_time_before_ms;
  EXPECT_NEAR(portable_ops.summary.predicted_time_after_ms,
              portable_sum.summary.predicted_time_after_ms * scale, 1e-9);
  EXPECT_LT(portable_ops.summary.predicted_time_after_ms, 40.0);
  EXPECT_GT(portable_ops.summary.predicted_time_after_ms, 0.0);
  // Unfrozen, no region is planned: the value decisions' plan scales the same way (one that
  // changed nothing would predict the run unchanged).
  f.p.model.frozen = false;
  const Schedule values_run = makeSchedule(f.p, f.cost, SchedOptions{});
  f.p.settings.model_run_ms = 0;
  const Schedule values_sum = makeSchedule(f.p, f.cost, SchedOptions{});
  f.p.settings.model_run_ms = 40.0;
  EXPECT_NEAR(values_run.summary.predicted_time_after_ms,
              values_sum.summary.predicted_time_after_ms * 40.0 /
                  values_sum.summary.predicted_time_before_ms,
              1e-9);
  // The profile keeps the time; a schedule says its scope.
  EXPECT_EQ(readProfile(JsonReader(toJson(f.p))).settings.model_run_ms, 40.0);
  EXPECT_TRUE(readSchedule(JsonReader(toJson(run))).summary.whole_run);
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

namespace {
// Three regions in a chain (0 feeds 1, 1 feeds 2: ShuffleNet's units), each 1 ms as it is; the
// outer two 0.5 ms packed, the middle one `middle_ms` packed and `blocked_ms` blocked, with the
// noise margin of a 0.1 ms spread. Converting the border tensor into channels-last costs 0.05 ms
// (measured, in the cost table).
xalloc::testing::Fixture chain(double middle_ms, double blocked_ms) {
  xalloc::testing::Fixture f;
  f.p.model.frozen = true;
  const Layout border{{1, 16, 8, 8}, {1024, 64, 8, 1}, 0, "float32", "cpu"};
  for (std::int64_t id = 0; id < 3; ++id) {
    Region g;
    g.ref.id = id;
    g.ref.convolutions = 1;
    Anchor a = f.p.ops[1].anchor;
    a.ordinal = 100 + id; // an op of its own
    g.ref.nodes = {a};
    g.entries = {border};
    g.exits = {border};
    const double packed = id == 1 ? middle_ms : 0.5;
    g.candidates = {measured(LayoutTarget::Contiguous, false, 1, 1),
                    measured(LayoutTarget::ChannelsLast, true, packed, 1, 3e-7),
                    measured(LayoutTarget::Blocked, false, id == 1 ? blocked_ms : 2, 1)};
    for (auto& c : g.candidates)
      c.delta_spread_ms = 0.1;
    if (id < 2)
      g.feeds = {{0, id + 1}};
    f.p.regions.push_back(g);
  }
  ConversionCost cc;
  cc.layout = border;
  cc.target = LayoutTarget::ChannelsLast;
  cc.median_ms = 0.05;
  cc.samples_ms = {0.05};
  f.cost.conversion_cost_table.push_back(cc);
  return f;
}

const Decision& regionDecision(const Schedule& s, std::int64_t id) {
  for (const auto& d : s.decisions)
    if (d.region && d.region->id == id)
      return d;
  throw std::runtime_error("no decision for region " + std::to_string(id));
}
} // namespace

TEST(SchedulerRegions, ARegionJoinsNeighboursWhoseBordersItSaves) {
  SchedOptions o;
  o.form = RewriteForm::Fast;
  // The middle region saves 0.02 ms packed, inside its noise margin on its own; with both
  // neighbours packed, its two borders convert nothing: 4 conversions of 0.05 ms saved.
  xalloc::testing::Fixture f = chain(0.98, 2);
  Schedule s = makeSchedule(f.p, f.cost, o);
  const Decision& d = regionDecision(s, 1);
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_TRUE(d.region_layout->packed);
  EXPECT_NE(d.reason.find("within the noise on its own"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("region(s) 0 and 2"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("0.2000 ms saved there"), std::string::npos) << d.reason;
  // Each region counts its own conversions: the middle its two, each neighbour its one.
  EXPECT_NEAR(d.predicted_saving_ms, 0.02 + 0.1, 1e-9);
  EXPECT_NEAR(regionDecision(s, 0).predicted_saving_ms, 0.5 + 0.05, 1e-9);
  double saved = 0;
  for (std::int64_t id = 0; id < 3; ++id)
    saved += regionDecision(s, id).predicted_saving_ms;
  EXPECT_NEAR(saved, 0.5 + 0.02 + 0.5 + 4 * 0.05, 1e-9);

  // The feeds survive the profile's JSON; one naming an exit the region lacks is refused.
  nlohmann::json doc = toJson(f.p);
  EXPECT_EQ(profileFromJson(doc, "p.json").regions[0].feeds.at(0).region, 1);
  doc["regions"][0]["feeds"][0]["exit"] = 1;
  EXPECT_THROW(profileFromJson(doc, "p.json"), std::exception);

  // Without the feeds (or with no price for the border), each region is judged alone.
  for (auto& g : f.p.regions)
    g.feeds.clear();
  s = makeSchedule(f.p, f.cost, o);
  EXPECT_EQ(regionDecision(s, 1).action, Action::None) << regionDecision(s, 1).reason;
  EXPECT_NE(regionDecision(s, 1).reason.find("within the noise margin"), std::string::npos);
  EXPECT_DOUBLE_EQ(regionDecision(s, 0).predicted_saving_ms, 0.5);

  // Slower on its own by more than its borders save: left as it is.
  f = chain(1.3, 2);
  s = makeSchedule(f.p, f.cost, o);
  EXPECT_EQ(regionDecision(s, 1).action, Action::None) << regionDecision(s, 1).reason;
  EXPECT_EQ(regionDecision(s, 0).action, Action::Sync);
}

TEST(SchedulerRegions, TheLayoutItsNeighboursShareWinsByWhatTheBordersSave) {
  SchedOptions o;
  o.form = RewriteForm::Fast;
  // Blocked is 0.05 ms faster than packed in the middle region alone, but among packed
  // neighbours it converts at both borders, which packed does not (0.2 ms): packed.
  xalloc::testing::Fixture f = chain(0.6, 0.55);
  Decision d = regionDecision(makeSchedule(f.p, f.cost, o), 1);
  EXPECT_TRUE(d.region_layout->packed) << d.reason;
  EXPECT_EQ(d.target, LayoutTarget::ChannelsLast);
  // Faster alone by more than what the borders save: blocked stands.
  f = chain(0.6, 0.3);
  d = regionDecision(makeSchedule(f.p, f.cost, o), 1);
  EXPECT_EQ(d.target, LayoutTarget::Blocked) << d.reason;
}

TEST(SchedulerRegions, FasterInNearlyEveryRoundIsFasterWhateverTheOutliers) {
  // At two threads on a shared machine, a quarter of the region's rounds as it is take ten times
  // their median: the paired differences' spread (38 ms) hides a candidate 2.8 ms faster.
  xalloc::testing::Fixture f = withRegion();
  f.p.settings.repeats = 15;
  f.p.regions[0].candidates.resize(3);
  RegionCandidate& packed = f.p.regions[0].candidates[2];
  packed = measured(LayoutTarget::ChannelsLast, true, 2, 4.8, 3e-7);
  packed.delta_spread_ms = 38;
  f.p.regions[0].candidates[0].time_ms = 4.8;
  f.p.regions[0].candidates[1].measured = false;
  SchedOptions o;
  o.form = RewriteForm::Fast;
  // No rounds recorded (an older profile): the spread decides, as before.
  Decision d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::None) << d.reason;
  // Faster in 14 of 15 rounds: a sign test's p of 5e-4.
  packed.rounds = 15;
  packed.faster_rounds = 14;
  d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_TRUE(d.region_layout->packed);
  EXPECT_NE(d.reason.find("faster in 14 of 15 paired rounds"), std::string::npos) << d.reason;
  // Faster in 10 of 15 (p 0.15): the outliers may be all there is; left as it is.
  packed.faster_rounds = 10;
  d = regionDecision(makeSchedule(f.p, f.cost, o));
  EXPECT_EQ(d.action, Action::None) << d.reason;
  // The counts survive the profile's JSON, and more faster rounds than rounds are refused.
  packed.faster_rounds = 14;
  nlohmann::json doc = toJson(f.p);
  const Profile back = profileFromJson(doc, "p.json");
  EXPECT_EQ(back.regions[0].candidates[2].faster_rounds, 14);
  EXPECT_EQ(back.regions[0].candidates[2].rounds, 15);
  doc["regions"][0]["candidates"][2]["faster_rounds"] = 16;
  EXPECT_THROW(profileFromJson(doc, "p.json"), std::exception);
}

// A region timed whole counts by that time in the prediction, not by its ops' per-op times
// (which carry the hooks' cost and leave out what runs between ops): before and after are then
// in the unit the region's gain was measured in.
TEST(SchedulerRegions, ARegionTimedWholeCountsByThatTime) {
  xalloc::testing::Fixture f = withRegion();
  double ops = 0;
  for (const auto& op : f.p.ops)
    ops += op.duration_ms;
  const double in_region = f.p.ops[1].duration_ms + f.p.ops[2].duration_ms;
  ASSERT_GT(in_region, 0);
  SchedOptions o;
  o.form = RewriteForm::Fast;
  const Schedule s = makeSchedule(f.p, f.cost, o);
  EXPECT_NEAR(s.summary.predicted_time_before_ms, ops - in_region + 10.0, 1e-9);
  EXPECT_LE(s.summary.predicted_time_after_ms, s.summary.predicted_time_before_ms - 5.0 + 1e-9);
  EXPECT_GE(s.summary.predicted_time_after_ms, 0.0);
  // A region that was not timed (a note says why) leaves its ops' times as they are.
  f.p.regions[0].note = "not timed";
  const Schedule untimed = makeSchedule(f.p, f.cost, o);
  EXPECT_NEAR(untimed.summary.predicted_time_before_ms, ops, 1e-9);
}
