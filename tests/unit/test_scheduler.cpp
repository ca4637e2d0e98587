// scheduler: per-site decisions from measured savings and predicted costs, the noise margin,
// the safety rules, the memory budget, and the predicted peak. C++ programs' sites and
// conversions fused into their producers: test_scheduler_programs.cpp.
#include <gtest/gtest.h>

#include <set>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/scheduler/tool.h"

#include "scheduler_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::scheduler;
using xalloc::testing::Fixture;

TEST(Scheduler, SyncWhenSavingBeatsCostAndRemoveWhenConversionIsWasted) {
  Fixture f;
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& dv = f.decisionFor(s, 10);
  EXPECT_EQ(dv.action, Action::Sync);
  EXPECT_EQ(dv.consumers, (std::vector<std::int64_t>{1, 2}));
  EXPECT_NEAR(dv.predicted_saving_ms, 0.6, 1e-12);
  EXPECT_NEAR(dv.predicted_cost_ms, 0.1, 1e-12);
  const auto& dw = f.decisionFor(s, 11);
  EXPECT_EQ(dw.action, Action::Remove);
  ASSERT_TRUE(dw.input_anchor.has_value());
  EXPECT_EQ(dw.input_anchor->op, "aten::transpose");
  // before: 4 x 1.0 + 0.2 ; after: saves 0.5 (sync) and 0.19 (remove)
  EXPECT_NEAR(s.summary.predicted_time_before_ms, 4.2, 1e-9);
  EXPECT_NEAR(s.summary.predicted_time_after_ms, 4.2 - 0.5 - 0.19, 1e-9);
  EXPECT_TRUE(s.summary.optimal);
  EXPECT_EQ(s.summary.gap, 0.0);
}

TEST(Scheduler, ASavingIsCappedAtItsConsumersTimeInTheRun) {
  // Re-run alone, each matmul took 5 ms with the transposed input and 1 ms with a contiguous
  // one; in the model's run they take 1 ms each. No conversion saves more than its consumers
  // take: the saving is their 2 ms, not the isolated 8, and the plan never predicts below zero.
  Fixture f;
  for (auto& c : f.v().consumers) {
    c.time_as_is_ms = 5.0;
    c.time_contiguous_ms = 1.0;
  }
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync);
  EXPECT_NEAR(d.predicted_saving_ms, 2.0, 1e-12);
  EXPECT_NEAR(s.summary.predicted_time_after_ms, 4.2 - (2.0 - 0.1) - 0.19, 1e-9);
  EXPECT_GE(s.summary.predicted_time_after_ms, 0.0);
  // Where the run's own times are tiny, the plan still predicts no less than nothing.
  for (auto& op : f.p.ops)
    op.duration_ms = 0.01;
  Schedule tiny = makeSchedule(f.p, f.cost);
  EXPECT_GE(tiny.summary.predicted_time_after_ms, 0.0);
  EXPECT_LE(f.decisionFor(tiny, 10).predicted_saving_ms, 0.02 + 1e-12);
}

TEST(Scheduler, NeverRemovesAConversionToAnotherMemoryFormat) {
  // x.contiguous(memory_format=torch.channels_last) on a row-major x: the input is contiguous,
  // yet the call is no pure overhead: it changes the layout every consumer sees.
  Fixture f;
  Record& in = f.p.records[1];
  in.layout = {{2, 8, 6, 6}, {288, 36, 6, 1}, 0, "float32", "cpu"};
  in.contiguous = true;
  Record& out = f.p.records[2];
  out.layout = {{2, 8, 6, 6}, {288, 1, 48, 8}, 0, "float32", "cpu"};
  out.contiguous = false;
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 11);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("another memory format"), std::string::npos) << d.reason;
  // The same call on a row-major output is what it looks like: pure overhead.
  out.layout = in.layout;
  out.contiguous = true;
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost), 11).action, Action::Remove);

  // ... unless a view reads it: contiguous at the profiled shapes (a one-token decoding step),
  // the input may not be at others (the prompt), where the view would fail without the call.
  f.p.ops[4].kind = "aten::view";
  const Schedule with_view = makeSchedule(f.p, f.cost);
  const auto& kept = f.decisionFor(with_view, 11);
  EXPECT_EQ(kept.action, Action::None);
  EXPECT_NE(kept.reason.find("aten::view needs a contiguous input; the input is contiguous at "
                             "these shapes, but may not be at others"),
            std::string::npos)
      << kept.reason;
}

TEST(Scheduler, AConstantsConversionIsFreeWhenEveryReaderGains) {
  // A frozen weight's transpose: xrewrite stores the weight in the layout its readers want, once.
  Fixture f;
  f.v().origin = formats::Origin::Constant;
  f.v().storage_id = 7; // a constant's own storage, not the input's
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync);
  EXPECT_EQ(d.predicted_cost_ms, 0.0);
  EXPECT_NE(d.reason.find("converted once"), std::string::npos) << d.reason;
  // The stored copy is part of the model, not an activation: the peak does not move.
  EXPECT_EQ(predictedPeakBytes(f.p, {d}), predictedPeakBytes(f.p, {}));
  // A reader that does not gain would see the new layout too: then it is an ordinary,
  // per-call conversion, priced by the cost table.
  f.v().consumers = {Fixture::consumer(1, 1.0, 0.7), Fixture::consumer(2, 1.0, 1.0)};
  const Decision d2 =
      f.decisionFor(makeSchedule(f.p, f.cost), 10); // a copy: the schedule is a temporary
  EXPECT_NEAR(d2.predicted_cost_ms, 0.1, 1e-12);
}

TEST(Scheduler, TheModulesMemoryIsNoActivation) {
  // v viewing a weight: the weight lives as long as the model, so only the copy a conversion
  // makes counts towards the activation peak.
  Fixture f;
  f.v().storage_id = 7;
  const std::int64_t with_view = predictedPeakBytes(f.p, {});
  f.v().module_storage = true;
  const std::int64_t without = predictedPeakBytes(f.p, {});
  EXPECT_EQ(with_view - without, f.v().bytes);
}

TEST(Scheduler, ALoopSiteAddsUpOverItsTripsAndNeverGoesAsync) {
  // v made and read on every one of 3 trips: 3 conversions for 3 faster reads per consumer.
  Fixture f;
  for (int id : {0, 1, 2})
    f.p.ops[static_cast<std::size_t>(id)].runs = 3;
  f.v().in_loop = true;
  f.p.gpu_idle_events.push_back(Fixture::window(0, 1, 5)); // hides one conversion of one trip
  const Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync) << d.reason;
  EXPECT_NEAR(d.predicted_saving_ms, 3 * 0.6, 1e-12);
  EXPECT_NEAR(d.predicted_cost_ms, 3 * 0.1, 1e-12);
  EXPECT_NE(d.reason.find("runs 3 times"), std::string::npos) << d.reason;
  // Where one trip's saving would not pay for the conversions of all trips, nothing is done:
  // consumer 1 runs on every trip, consumer 2 only once, and they gain 0.1 and 0.2.
  Fixture g;
  g.p.ops[0].runs = 3;
  g.p.ops[1].runs = 3;
  g.v().in_loop = true;
  g.v().consumers = {Fixture::consumer(1, 1.0, 0.99), Fixture::consumer(2, 1.0, 0.8)};
  g.cost.conversion_cost_table[0].median_ms = 0.1;
  g.cost.conversion_cost_table[0].samples_ms = {0.1};
  EXPECT_EQ(g.decisionFor(makeSchedule(g.p, g.cost), 10).action, Action::None);

  // Trips of falling size (an FPN head): v was measured on the heaviest, and the three trips
  // made 1.5 times its bytes, so a third of the time is saved and spent, not all of it.
  Fixture h = f;
  h.v().runs_by_bytes = 1.5;
  const Schedule hs = makeSchedule(h.p, h.cost);
  const auto& hd = h.decisionFor(hs, 10);
  EXPECT_EQ(hd.action, Action::Sync) << hd.reason;
  EXPECT_NEAR(hd.predicted_saving_ms, 1.5 * 0.6, 1e-12);
  EXPECT_NEAR(hd.predicted_cost_ms, 1.5 * 0.1, 1e-12);
  EXPECT_NE(hd.reason.find("runs 3 times per run of the model; by their bytes its trips add up to "
                           "1.50 of the one measured"),
            std::string::npos)
      << hd.reason;
  EXPECT_NEAR(s.summary.predicted_time_after_ms - hs.summary.predicted_time_after_ms,
              -(3 - 1.5) * (0.6 - 0.1), 1e-9);
}

TEST(Scheduler, NeverChoosesWhatTheProfileSaysIsSlower) {
  Fixture f;
  f.v().consumers = {Fixture::consumer(1, 1.0, 1.05), Fixture::consumer(2, 1.0, 0.95)};
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::None); // saves 0.05 in one consumer, costs 0.1
  f.v().consumers = {Fixture::consumer(1, 1.0, 1.5)};
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost), 10).action, Action::None);
}

TEST(Scheduler, NoiseMarginBlocksUncertainGains) {
  Fixture f;
  f.v().consumers = {Fixture::consumer(1, 1.0, 0.8)}; // gains 0.2 for a 0.1 cost
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost), 10).action, Action::Sync);
  f.v().consumers[0].time_as_is_spread_ms = 0.5; // but measured with a wide spread
  f.v().consumers[0].time_contiguous_spread_ms = 0.5;
  const auto d = f.decisionFor(makeSchedule(f.p, f.cost), 10);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("noise margin"), std::string::npos);
}

// The relative margin covers the conversion's time too: timings drift together from one process
// to the next, so a gain that is a sliver of the time traded does not repeat.
TEST(Scheduler, RelativeMarginCoversTheConversion) {
  Fixture f;
  f.v().consumers = {Fixture::consumer(1, 0.2, 0.02)}; // gains 0.18
  f.cost.conversion_cost_table[0].median_ms = 0.165;   // for 0.165: 0.015 net, 7.5% of 0.2
  f.cost.conversion_cost_table[0].samples_ms = {0.165};
  auto d = f.decisionFor(makeSchedule(f.p, f.cost), 10);
  EXPECT_EQ(d.action, Action::None); // 5% of the 0.365 ms traded is 0.018
  EXPECT_NE(d.reason.find("noise margin 0.018"), std::string::npos) << d.reason;
  f.cost.conversion_cost_table[0].median_ms = 0.14; // 0.04 net beats it
  f.cost.conversion_cost_table[0].samples_ms = {0.14};
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost), 10).action, Action::Sync);
}

// Gains that are a sliver of the whole model are not worth an edit (and come and go between
// runs), however clean their measurement.
TEST(Scheduler, GainsBelowAFractionOfTheModelAreNotWorthAnEdit) {
  Fixture f;
  for (auto& op : f.p.ops)
    op.duration_ms *= 10;                               // a 42 ms model: 0.1% is 0.042 ms
  f.v().consumers = {Fixture::consumer(1, 0.05, 0.02)}; // gains 0.03
  f.cost.conversion_cost_table[0].median_ms = 0.0001;
  f.cost.conversion_cost_table[0].samples_ms = {0.0001};
  auto d = f.decisionFor(makeSchedule(f.p, f.cost), 10);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("the smallest gain worth an edit 0.042"), std::string::npos) << d.reason;
  SchedOptions o;
  o.min_model_gain = 0;
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost, o), 10).action, Action::Sync);
}

TEST(Scheduler, SafetyRulesKeepTheModelsResults) {
  Fixture f;
  f.v().has_writers = true;
  EXPECT_EQ(f.decisionFor(makeSchedule(f.p, f.cost), 10).action, Action::None);
  Fixture g;
  for (auto& c : g.v().consumers)
    c.identical_output = false;
  auto d = g.decisionFor(makeSchedule(g.p, g.cost), 10);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("output bits"), std::string::npos);
  Fixture l; // a consumer whose output layout follows its input: downstream effects unmeasured
  for (auto& c : l.v().consumers)
    c.same_output_layout = false;
  d = l.decisionFor(makeSchedule(l.p, l.cost), 10);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("layout"), std::string::npos);
  Fixture lr;
  lr.p.records[2].consumers[0].same_output_layout = false;
  EXPECT_EQ(lr.decisionFor(makeSchedule(lr.p, lr.cost), 11).action, Action::None);
  Fixture h;
  h.p.records[2].consumers[0].accepts_noncontiguous = false; // e.g. aten::view
  h.p.records[2].consumers[0].measured = false;
  d = h.decisionFor(makeSchedule(h.p, h.cost), 11);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("needs a contiguous input"), std::string::npos);
  Fixture k;
  k.v().origin =
      formats::Origin::LoopCarried; // a loop body's parameter: no op of its own to convert after
  k.v().in_loop = true;
  for (const auto& dd : makeSchedule(k.p, k.cost).decisions)
    EXPECT_NE(dd.value_id, 10);
}

TEST(Scheduler, MemoryBudget) {
  Fixture f;
  f.p.records[2].consumers[0].accepts_noncontiguous = false; // keep the conversion: no remove
  std::int64_t base_peak = predictedPeakBytes(f.p, {});
  // The input (storage 0, read by the transposed view until op 3) and w (storage 1) overlap at
  // op 3: two 16 KiB buffers.
  EXPECT_EQ(base_peak, 2 * 16384);
  Schedule free_run = makeSchedule(f.p, f.cost);
  EXPECT_GT(free_run.summary.peak_bytes_after, 0);
  SchedOptions o;
  o.memory_budget_bytes = base_peak; // no room for the extra copy of the sync decision
  Schedule s = makeSchedule(f.p, f.cost, o);
  EXPECT_LE(s.summary.peak_bytes_after, base_peak);
  EXPECT_EQ(f.decisionFor(s, 10).action, Action::None);
  EXPECT_NE(f.decisionFor(s, 10).reason.find("memory budget"), std::string::npos);
  // The exact solver proves that dropping the conversion is the best plan within the budget.
  EXPECT_TRUE(s.summary.optimal);
  EXPECT_EQ(s.summary.gap, 0.0);
  EXPECT_GT(s.summary.predicted_time_after_ms, free_run.summary.predicted_time_after_ms);
  o.memory_budget_bytes = base_peak - 1;
  try {
    makeSchedule(f.p, f.cost, o);
    ADD_FAILURE() << "an impossible budget was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("smallest feasible budget is " + std::to_string(base_peak)),
        std::string::npos)
        << e.what();
  }
}

TEST(Scheduler, ExplainNamesEverySite) {
  Fixture f;
  Schedule s = makeSchedule(f.p, f.cost);
  ASSERT_FALSE(s.decisions.empty());
  // A model's ops carry their module path, shown before the expression.
  for (auto& op : s.ops)
    if (op.id == s.decisions[0].producer)
      op.scope = "blocks.0.fc";
  std::string text = explainSchedule(s);
  EXPECT_NE(text.find("blocks.0.fc: "), std::string::npos) << text;
  EXPECT_NE(text.find("m.py:1"), std::string::npos);
  EXPECT_NE(text.find("sync"), std::string::npos);
  EXPECT_NE(text.find("remove"), std::string::npos);
  EXPECT_NE(text.find("predicted 4.2000"), std::string::npos);

  // Columns widen to their content; a file name too long for its column loses its start, not
  // the line number.
  s.decisions[0].anchor.file = "/src/" + std::string(60, 'a') + "_layers.py";
  s.decisions[0].anchor.line = 225;
  text = explainSchedule(s);
  EXPECT_NE(text.find("\n..." + std::string(23, 'a') + "_layers.py:225 blocks.0.fc: "),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("/src/"), std::string::npos) << text;

  // One output of several (`x.split(...)`) says which, even when its expression is cut.
  for (auto& op : s.ops)
    if (op.id == s.decisions[0].producer)
      op.outputs = {10, 13};
  s.decisions[0].output_index = 1;
  s.decisions[0].anchor.expr = "x.split(" + std::string(80, 'n') + ")";
  text = explainSchedule(s);
  EXPECT_NE(text.find("blocks.0.fc: x.split(" + std::string(28, 'n') + "... [1] [64,64]"),
            std::string::npos)
      << text;
}

TEST(Scheduler, ExplainKeepsTheLastCallOfACutExpression) {
  // Swin's window partition: the permute and the aten::contiguous after it share their start,
  // longer than the column; what tells them apart is the last call.
  Fixture f;
  Schedule s = makeSchedule(f.p, f.cost);
  ASSERT_GE(s.decisions.size(), 2u);
  const std::string permute = "x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5)";
  s.decisions[0].anchor.expr = permute;
  s.decisions[1].anchor.expr = permute + ".contiguous()";
  const std::string text = explainSchedule(s);
  EXPECT_NE(text.find(" x.view(B, H // w, w, W // ...).permute(0, 1, 3, 2, 4, 5) "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" x.view(B, H // w, w, W // w, w, C).perm...).contiguous() "),
            std::string::npos)
      << text;
  // A last call too long to keep (half the column) leaves the start and "...".
  s.decisions[1].anchor.expr = "x.view(1, 2)." + std::string(60, 'f') + "()";
  EXPECT_NE(explainSchedule(s).find(" x.view(1, 2)." + std::string(40, 'f') + "... "),
            std::string::npos)
      << explainSchedule(s);
}

TEST(Scheduler, AReshapeThatCopiesIsNamedAsTheConversion) {
  // `(a @ v).transpose(1, 2).reshape(...)`: the layout has no view in the new shape, so the
  // reshape copies; with a contiguous input it is a view, and it gains what the copy costs.
  Fixture f;
  for (int op : {1, 2})
    f.p.ops[op].kind = "aten::reshape";
  f.v().consumers = {Fixture::consumer(1, 0.06, 0.01), Fixture::consumer(2, 0.06, 0.01)};
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::None);
  EXPECT_NE(d.reason.find("aten::reshape copies it already"), std::string::npos) << d.reason;
  // Views that gain nothing read no data.
  f.v().consumers = {Fixture::consumer(1, 0.01, 0.01), Fixture::consumer(2, 0.01, 0.01)};
  s = makeSchedule(f.p, f.cost);
  EXPECT_EQ(f.decisionFor(s, 10).reason, "its consumers are views, which read no data");
}

// Each decision records what decided it as data (the rule's id, not only its prose), and the
// stored schedule keeps it.
TEST(Scheduler, EachDecisionRecordsTheRuleThatDecidedIt) {
  Fixture f;
  Schedule s = makeSchedule(f.p, f.cost);
  ASSERT_FALSE(s.decisions.empty());
  std::set<std::string> rules;
  for (const auto& d : s.decisions) {
    EXPECT_FALSE(d.rule.empty()) << d.reason;
    rules.insert(d.rule);
    // The verdict's rule gives the action it names: convert syncs, remove removes.
    if (d.rule == "convert") {
      EXPECT_EQ(d.action, Action::Sync) << d.reason;
    }
    if (d.rule == "remove") {
      EXPECT_EQ(d.action, Action::Remove) << d.reason;
    }
  }
  EXPECT_TRUE(rules.count("convert") || rules.count("solver")) << "the fixture converts a value";
  EXPECT_TRUE(rules.count("remove")) << "the fixture removes a conversion";
  const Schedule back = scheduleFromJson(toJson(s), "schedule.json");
  ASSERT_EQ(back.decisions.size(), s.decisions.size());
  for (std::size_t i = 0; i < s.decisions.size(); ++i)
    EXPECT_EQ(back.decisions[i].rule, s.decisions[i].rule);
  EXPECT_NE(explainSchedule(s).find("[" + s.decisions[0].rule + "] "), std::string::npos);
}
