// scheduler: per-site decisions from measured savings and predicted costs, the noise margin,
// the safety rules, the memory budget, and the predicted peak.
#include <gtest/gtest.h>

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

TEST(Scheduler, AProgramsSiteInsideLibtorchStaysNoneAndSaysWhy) {
  // In a C++ program's profile, ops libtorch runs for one call of the program's (the weight's
  // `t` in torch::nn::Linear's forward) have no anchor: no source edit can reach them.
  Fixture f;
  f.p.model.format = formats::ModelFormat::LibtorchProgram;
  f.p.ops[0].anchor = Anchor{};
  f.p.ops[0].source = {"src/net.cpp", 14, 30, "auto y = fc->forward(x);"};
  f.p.ops[3].anchor = Anchor{};
  f.p.ops[3].source = f.p.ops[0].source;
  Schedule s = makeSchedule(f.p, f.cost);
  const auto& dv = f.decisionFor(s, 10);
  EXPECT_EQ(dv.action, Action::None);
  EXPECT_NE(dv.reason.find("would save 0.6000 ms for a cost of 0.1000 ms, but libtorch makes it "
                           "(aten::transpose inside `auto y = fc->forward(x);` at "
                           "src/net.cpp:14:30)"),
            std::string::npos)
      << dv.reason;
  const auto& dw = f.decisionFor(s, 11);
  EXPECT_EQ(dw.action, Action::None);
  EXPECT_NE(dw.reason.find("removing it would save 0.2000 ms"), std::string::npos) << dw.reason;
  // Nothing unreachable is counted in the prediction; the explanation shows where it ran.
  EXPECT_NEAR(s.summary.predicted_time_after_ms, s.summary.predicted_time_before_ms, 1e-12);
  const std::string text = explainSchedule(s);
  EXPECT_NE(text.find("net.cpp:14             aten::transpose"), std::string::npos) << text;

  // The same sites with anchors are converted and removed as usual; a TorchScript model's ops
  // are graph nodes, reachable with or without an anchor.
  Fixture g;
  g.p.model.format = formats::ModelFormat::LibtorchProgram;
  const Schedule sg = makeSchedule(g.p, g.cost);
  EXPECT_EQ(g.decisionFor(sg, 10).action, Action::Sync);
  EXPECT_EQ(g.decisionFor(sg, 11).action, Action::Remove);
  Fixture h;
  h.p.ops[0].anchor = Anchor{};
  EXPECT_EQ(h.decisionFor(makeSchedule(h.p, h.cost), 10).action, Action::Sync);
}

// A C++ program's helper reached from two places: two ops (call stacks) with one anchor. Op 5
// runs the same expression as op 0 and makes value 12 (v's layout), read by op 6.
Fixture twoCalls(double other_as_is, double other_contiguous, bool other_identical = true) {
  Fixture f;
  f.p.model.format = formats::ModelFormat::LibtorchProgram;
  for (int i : {5, 6}) {
    Op op = f.p.ops[i == 5 ? 0 : 1];
    op.id = i;
    if (i == 6)
      op.anchor.expr = "e6";
    f.p.ops.push_back(op);
  }
  Record r = f.v();
  r.id = 12;
  r.name = "v12";
  r.producer_op = 5;
  r.storage_id = 2;
  r.consumers = {Fixture::consumer(6, other_as_is, other_contiguous)};
  r.consumers[0].identical_output = other_identical;
  f.p.records.push_back(r);
  return f;
}

TEST(Scheduler, AProgramsExpressionReachedTwiceIsDecidedOnceForBothCalls) {
  // Alone, v (op 0) gains 0.6 - 0.1 and value 12 (op 5) gains nothing for 0.1: one edit converts
  // both, and together they still gain 0.4.
  Fixture f = twoCalls(1.0, 1.0);
  Schedule s = makeSchedule(f.p, f.cost);
  for (std::int64_t id : {10, 12}) {
    const Decision& d = f.decisionFor(s, id);
    EXPECT_EQ(d.action, Action::Sync) << id;
    EXPECT_NE(d.reason.find("one edit changes all 2 calls of this expression: together they "
                            "gain 0.4000 ms"),
              std::string::npos)
        << d.reason;
  }
  EXPECT_NEAR(s.summary.predicted_time_after_ms, s.summary.predicted_time_before_ms - 0.4 - 0.19,
              1e-9);

  // The other call is slower with a contiguous input (every use of a program's value reads the
  // copy, not only those that gain): together they lose, and neither is converted.
  Fixture slow = twoCalls(1.0, 1.6);
  s = makeSchedule(slow.p, slow.cost);
  EXPECT_EQ(slow.decisionFor(s, 12).action, Action::None);
  const Decision& dv = slow.decisionFor(s, 10);
  EXPECT_EQ(dv.action, Action::None);
  EXPECT_NE(dv.reason.find("together they gain -0.2000 ms, not more than the margin"),
            std::string::npos)
      << dv.reason;

  // The other call's consumer gives other bits with a contiguous input: ruled out for both,
  // whatever v gains.
  Fixture bits = twoCalls(1.0, 0.5, false);
  s = makeSchedule(bits.p, bits.cost);
  EXPECT_EQ(bits.decisionFor(s, 12).action, Action::None);
  EXPECT_EQ(bits.decisionFor(s, 10).action, Action::None);
  EXPECT_NE(bits.decisionFor(s, 10).reason.find(
                "it is ruled out for the call on [64,64]: a contiguous input changes the "
                "consumer's output bits"),
            std::string::npos)
      << bits.decisionFor(s, 10).reason;

  // In a TorchScript model the same anchors are two graph nodes, edited apart.
  Fixture graph = twoCalls(1.0, 0.5, false);
  graph.p.model.format = formats::ModelFormat::TorchScript;
  s = makeSchedule(graph.p, graph.cost);
  EXPECT_EQ(graph.decisionFor(s, 10).action, Action::Sync);
  EXPECT_EQ(graph.decisionFor(s, 12).action, Action::None);
}

TEST(Scheduler, AProgramsConversionMustSuitEveryUseOfTheValue) {
  // v's consumer 2 gives other bits with a contiguous input. A graph rewires consumer 1 alone;
  // a program's `.contiguous()` reaches both, so it is ruled out.
  Fixture graph;
  graph.v().consumers[1].identical_output = false;
  const Schedule sg = makeSchedule(graph.p, graph.cost);
  const Decision& dg = graph.decisionFor(sg, 10);
  EXPECT_EQ(dg.action, Action::Sync);
  EXPECT_EQ(dg.consumers, (std::vector<std::int64_t>{1}));
  Fixture prog;
  prog.p.model.format = formats::ModelFormat::LibtorchProgram;
  prog.v().consumers[1].identical_output = false;
  const Schedule s = makeSchedule(prog.p, prog.cost);
  const Decision& dp = prog.decisionFor(s, 10);
  EXPECT_EQ(dp.action, Action::None);
  EXPECT_NE(dp.reason.find("the edit would convert the value for every use of it, and 1 of 2 "
                           "consumer(s) give other output bits"),
            std::string::npos)
      << dp.reason;
}

TEST(Scheduler, ReadersOfSizesNeitherBlockNorServeAConversion) {
  // `B, C = w.shape` after `w = v.contiguous()`: aten::size is never re-run (no layout changes
  // sizes), and it must not keep the wasted conversion. aten::stride does see the layout.
  for (const std::string kind : {"aten::size", "aten::stride"}) {
    Fixture f;
    Op op = f.p.ops[4];
    op.id = 5;
    op.kind = kind;
    op.anchor.expr = "w.shape";
    f.p.ops.push_back(op);
    ConsumerTiming c;
    c.op_id = 5;
    c.note = "reads only sizes or flags, not the data; not re-run";
    f.p.records[2].consumers.push_back(c);
    f.v().consumers.push_back(c); // v read by it too: no saving there, no veto
    const Schedule s = makeSchedule(f.p, f.cost);
    EXPECT_EQ(f.decisionFor(s, 10).action, Action::Sync) << kind;
    const Decision& d = f.decisionFor(s, 11);
    if (kind == "aten::size") {
      EXPECT_EQ(d.action, Action::Remove) << d.reason;
    } else {
      EXPECT_EQ(d.action, Action::None);
      EXPECT_EQ(d.reason, "aten::stride could not be measured without the conversion");
    }
  }
}

namespace {
// aten::mul writing row-major itself, timed `fused_ms` against `separate_ms` for the mul and its
// conversion (spread 0.01 ms), with the same bits.
ProducerFusion mulFusion(double separate_ms, double fused_ms) {
  ProducerFusion pf;
  pf.op = "aten::mul.Scalar_out";
  pf.template_input = 0;
  pf.separate_ms = separate_ms;
  pf.fused_ms = fused_ms;
  pf.delta_ms = fused_ms - separate_ms;
  pf.delta_spread_ms = 0.01;
  return pf;
}
} // namespace

// A conversion its producer can write itself (the out variant into a row-major buffer, measured
// faster than converting after it): the decision says so, and its cost is what remains.
TEST(Scheduler, AConversionFusedIntoItsProducerCostsWhatTheFusionLeaves) {
  Fixture f;
  f.p.ops[0].kind = "aten::mul";
  f.v().producer_fusion = mulFusion(1.0, 0.92);
  Schedule s = makeSchedule(f.p, f.cost);
  const Decision d = f.decisionFor(s, 10);
  EXPECT_EQ(d.action, Action::Sync);
  ASSERT_TRUE(d.fused_template_input.has_value());
  EXPECT_EQ(*d.fused_template_input, 0);
  EXPECT_NEAR(d.predicted_cost_ms, 0.1 - 0.08, 1e-9);
  EXPECT_NE(d.reason.find("fused into its producer"), std::string::npos) << d.reason;
  // The schedule says it, and reads back the same.
  const Schedule back = scheduleFromJson(toJson(s), "s.json");
  EXPECT_EQ(f.decisionFor(back, 10).fused_template_input, d.fused_template_input);

  // Not when the fusion's gain is within its noise.
  f.v().producer_fusion->delta_spread_ms = 1.0;
  EXPECT_FALSE(f.decisionFor(makeSchedule(f.p, f.cost), 10).fused_template_input);
  f.v().producer_fusion->delta_spread_ms = 0.01;

  // Other bits: within the tolerance it fuses, under --exact it converts separately.
  f.v().producer_fusion->identical_output = false;
  f.v().producer_fusion->output_error = 1e-6;
  EXPECT_TRUE(f.decisionFor(makeSchedule(f.p, f.cost), 10).fused_template_input);
  SchedOptions exact;
  exact.tolerance = 0;
  const Decision e = f.decisionFor(makeSchedule(f.p, f.cost, exact), 10);
  EXPECT_EQ(e.action, Action::Sync);
  EXPECT_FALSE(e.fused_template_input);
  EXPECT_NEAR(e.predicted_cost_ms, 0.1, 1e-9);

  // Not when a consumer keeps reading the value as it is: the producer must make it for them.
  f.v().producer_fusion->identical_output = true;
  f.v().consumers.push_back(Fixture::consumer(4, 1.0, 1.2)); // slower with a row-major input
  EXPECT_FALSE(f.decisionFor(makeSchedule(f.p, f.cost), 10).fused_template_input);
}

// An existing row-major conversion that its consumers need (kept), whose input only it reads
// and a pointwise op makes: the op writes row-major itself and the conversion goes, when that
// was measured faster beyond the noise and within the tolerance.
TEST(Scheduler, AnExistingConversionIsFusedIntoItsPointwiseProducer) {
  Fixture f;
  f.p.ops[0].kind = "aten::mul";
  f.v().consumers = {Fixture::consumer(3, 0.2, 0.2)};      // the existing aten::contiguous alone
  f.p.records[2].consumers[0].time_noncontiguous_ms = 1.6; // its reader needs it: kept
  f.v().producer_fusion = mulFusion(1.2, 1.0);
  const Schedule s = makeSchedule(f.p, f.cost);
  const Decision& d = f.decisionFor(s, 11);
  EXPECT_EQ(d.action, Action::Remove) << d.reason;
  ASSERT_TRUE(d.fused_template_input.has_value());
  EXPECT_EQ(*d.fused_template_input, 0);
  EXPECT_NE(d.reason.find("fused into its producer"), std::string::npos) << d.reason;
  EXPECT_NEAR(s.summary.predicted_time_before_ms - s.summary.predicted_time_after_ms, 0.2, 1e-9);
  const Schedule back = scheduleFromJson(toJson(s), "s.json");
  EXPECT_EQ(f.decisionFor(back, 11).fused_template_input, d.fused_template_input);
  EXPECT_EQ(f.decisionFor(back, 11).action, Action::Remove);
  bool by_rule = false; // a registered keep rule (rules.def) took the kept conversion away
  for (const auto& v : siteVerdicts(f.p, f.cost, SchedOptions{}))
    by_rule |= v.value_id == 11 && std::string(v.rule) == "fuse-existing";
  EXPECT_TRUE(by_rule);

  // Not within the noise, not beyond the tolerance, not when another op reads the input.
  Fixture noisy = f;
  noisy.v().producer_fusion->delta_spread_ms = 1.0;
  EXPECT_EQ(noisy.decisionFor(makeSchedule(noisy.p, noisy.cost), 11).action, Action::None);
  Fixture bits = f;
  bits.v().producer_fusion->identical_output = false;
  bits.v().producer_fusion->output_error = 1e-6;
  EXPECT_EQ(bits.decisionFor(makeSchedule(bits.p, bits.cost), 11).action, Action::Remove);
  SchedOptions exact;
  exact.tolerance = 0;
  EXPECT_EQ(bits.decisionFor(makeSchedule(bits.p, bits.cost, exact), 11).action, Action::None);
  Fixture shared = f;
  shared.v().consumers.push_back(Fixture::consumer(1, 1.0, 1.0));
  EXPECT_FALSE(shared.decisionFor(makeSchedule(shared.p, shared.cost), 11).fused_template_input);
}
