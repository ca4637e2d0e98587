// scheduler: a C++ program's sites (inside libtorch: none; one expression reached from two
// calls decided once; a conversion suiting every use; readers of sizes), and conversions fused
// into their pointwise producers.
#include <gtest/gtest.h>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/scheduler/tool.h"

#include "scheduler_fixture.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::scheduler;
using xalloc::testing::Fixture;

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
  // A program's prediction says what it covers: the call sites timed, not the program's run.
  EXPECT_NE(text.find("predicted for the " + std::to_string(s.ops.size()) +
                      " call sites timed in the profiled run (not the whole run) "),
            std::string::npos)
      << text;

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

TEST(Scheduler, AProgramsPlanPredictsItsWholeRunWhenTheProfileTimedIt) {
  // The program's whole run (xprof run: the hooked run less the hook's own work) is what a
  // plan changes; the call sites' times (here 4.2 ms) are a part of it.
  Fixture f;
  f.p.model.format = formats::ModelFormat::LibtorchProgram;
  const Schedule sites = makeSchedule(f.p, f.cost);
  EXPECT_FALSE(sites.summary.whole_run);
  EXPECT_NEAR(sites.summary.predicted_time_before_ms, 4.2, 1e-9);
  EXPECT_NE(explainSchedule(sites).find("call sites timed in the profiled run (not the whole run)"),
            std::string::npos);
  f.p.settings.program_run_ms = 250.0;
  const Schedule run = makeSchedule(f.p, f.cost);
  EXPECT_TRUE(run.summary.whole_run);
  EXPECT_NEAR(run.summary.predicted_time_before_ms, 250.0, 1e-9);
  // The same decisions, so the same gain off the whole run.
  EXPECT_NEAR(run.summary.predicted_time_before_ms - run.summary.predicted_time_after_ms,
              sites.summary.predicted_time_before_ms - sites.summary.predicted_time_after_ms, 1e-9);
  EXPECT_NE(
      explainSchedule(run).find("for the whole profiled run (less xprof's own work) 250.0000"),
      std::string::npos)
      << explainSchedule(run);
  // Both survive the documents: the profile's run time, the schedule's scope.
  const Profile back = readProfile(JsonReader(toJson(f.p)));
  EXPECT_EQ(back.settings.program_run_ms, 250.0);
  EXPECT_TRUE(readSchedule(JsonReader(toJson(run))).summary.whole_run);
  // A TorchScript model's profile never has it: its ops are the whole model.
  f.p.model.format = formats::ModelFormat::TorchScript;
  EXPECT_FALSE(makeSchedule(f.p, f.cost).summary.whole_run);
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
