// xsched's per-site rules (scheduler/src/rules/): each scenario checks the verdict, which rule
// gave it and what blocked the edit, not the reason's wording (every verdict is rendered,
// though: a sentence that needs a value its rule did not give fails here). The fixture's value 10
// is a transposed view read by two matmuls; value 11 the output of an existing aten::contiguous
// read by one op.
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler_fixture.h"
#include "xalloc/scheduler/decide.h"

using namespace xalloc;
using namespace xalloc::formats;
using namespace xalloc::scheduler;
using xalloc::testing::Fixture;
using xalloc::testing::verdictFor;

namespace {

// What blocks the edit, by the rule that decided (contiguous-input: an edit unless a consumer
// needs the call; program-wide-edit here: a use with other output bits).
Blocker blockerOf(const std::string& rule, Action action) {
  static const std::vector<std::pair<std::string, Blocker>> by_rule = {
      {"written-in-place", Blocker::Written},
      {"no-cost-model", Blocker::NoCostModel},
      {"output-bits", Blocker::OutputBits},
      {"output-layout", Blocker::OutputLayout},
      {"program-wide-edit", Blocker::OutputBits},
      {"library-internal", Blocker::NoSourceEdit},
      {"views", Blocker::NothingToGain},
      {"copying-reshape", Blocker::NothingToGain},
      {"sizes-only", Blocker::NothingToGain},
      {"already-converted", Blocker::NothingToGain},
      {"no-gain", Blocker::NothingToGain},
      {"empty-value", Blocker::NothingToGain},
      {"unmeasured", Blocker::Unmeasured},
      {"noise-margin", Blocker::BelowMargin},
      {"unrecorded-input", Blocker::NotRecorded},
      {"other-memory-format", Blocker::OtherFormat},
      {"needs-contiguous", Blocker::NeedsContiguous},
      {"contiguous-input", Blocker::NeedsContiguous}};
  if (action != Action::None)
    return Blocker::None;
  for (const auto& [name, blocker] : by_rule)
    if (name == rule)
      return blocker;
  ADD_FAILURE() << "no blocker listed for " << rule;
  return Blocker::None;
}

void expectVerdict(const Fixture& f, std::int64_t value, Action action, const std::string& rule,
                   bool veto) {
  const SiteVerdict v = verdictFor(f, value);
  EXPECT_EQ(v.action, action) << rule;
  EXPECT_EQ(v.rule, rule);
  EXPECT_EQ(v.veto, veto) << rule;
  EXPECT_EQ(toString(v.blocker), std::string(toString(blockerOf(rule, action)))) << rule;
  EXPECT_FALSE(v.reason.empty()) << rule;
}

// A named number of a verdict.
double valueOf(const SiteVerdict& v, const std::string& name) {
  for (const auto& nv : v.values)
    if (nv.name == name) {
      const double* n = std::get_if<double>(&nv.value);
      EXPECT_NE(n, nullptr) << name << " is a number";
      return n ? *n : 0;
    }
  ADD_FAILURE() << v.rule << " gives no value " << name;
  return 0;
}

} // namespace

TEST(Rules, TheFixturesSitesAreConvertedAndRemoved) {
  Fixture f;
  expectVerdict(f, 10, Action::Sync, "convert", false);
  expectVerdict(f, 11, Action::Remove, "remove", false);
}

TEST(Rules, AValueWrittenInPlaceIsNeverConverted) {
  Fixture f;
  f.v().has_writers = true;
  expectVerdict(f, 10, Action::None, "written-in-place", true);
  Fixture g; // a removal whose input is written in place
  g.p.records[1].has_writers = true;
  g.p.records[1].contiguous = false;
  expectVerdict(g, 11, Action::None, "written-in-place", true);
}

TEST(Rules, AnUnpricedConversionIsNotWeighed) {
  Fixture f;
  f.cost.conversion_cost_table.clear(); // no measured entry and no fitted model
  expectVerdict(f, 10, Action::None, "no-cost-model", true);
}

TEST(Rules, OtherOutputBitsOrLayoutsVetoTheConversion) {
  Fixture f;
  for (auto& c : f.v().consumers)
    c.identical_output = false;
  expectVerdict(f, 10, Action::None, "output-bits", true);
  Fixture g;
  for (auto& c : g.v().consumers)
    c.same_output_layout = false;
  expectVerdict(g, 10, Action::None, "output-layout", true);
  Fixture r; // the same for a removal: its consumer's bits differ without the conversion
  r.p.records[2].consumers[0].identical_output = false;
  expectVerdict(r, 11, Action::None, "output-bits", true);
  Fixture l;
  l.p.records[2].consumers[0].same_output_layout = false;
  expectVerdict(l, 11, Action::None, "output-layout", true);
}

// Outputs that move, but within the tolerance (max |new - as-is| over max |as-is|, as xprof
// measured it), are the same computation; beyond it, or under --exact, they veto the edit. An
// unbounded change (no measured error) fits no tolerance.
TEST(Rules, OutputsThatMoveWithinTheToleranceAreTheSame) {
  SchedOptions exact;
  exact.tolerance = 0;
  Fixture f;
  for (auto& c : f.v().consumers) {
    c.identical_output = false;
    c.output_error = 3e-7;
  }
  f.p.records[2].consumers[0].identical_output = false;
  f.p.records[2].consumers[0].output_error = 3e-7;
  expectVerdict(f, 10, Action::Sync, "convert", false); // the default tolerance, 1e-4
  expectVerdict(f, 11, Action::Remove, "remove", false);
  EXPECT_EQ(verdictFor(f, 10, exact).rule, "output-bits");
  EXPECT_EQ(verdictFor(f, 11, exact).rule, "output-bits");
  SchedOptions tight;
  tight.tolerance = 1e-7;
  EXPECT_EQ(verdictFor(f, 10, tight).rule, "output-bits");
  Fixture u; // other bits and no measured error: unbounded
  for (auto& c : u.v().consumers)
    c.identical_output = false;
  SchedOptions loose;
  loose.tolerance = 1.0;
  EXPECT_EQ(verdictFor(u, 10, loose).rule, "output-bits");
}

TEST(Rules, ViewsAndCopyingReshapesGainNothingFromAConversion) {
  Fixture f;
  f.p.ops[1].kind = f.p.ops[2].kind = "aten::view";
  for (auto& c : f.v().consumers)
    c.time_contiguous_ms = c.time_as_is_ms; // a view takes as long either way
  expectVerdict(f, 10, Action::None, "views", false);
  Fixture r; // a reshape that gains (a little) from a contiguous input copied it already
  r.p.ops[1].kind = r.p.ops[2].kind = "aten::reshape";
  for (auto& c : r.v().consumers)
    c.time_contiguous_ms = c.time_as_is_ms - 0.001;
  expectVerdict(r, 10, Action::None, "copying-reshape", false);
}

TEST(Rules, ReadersOfSizesAndExistingConversionsAreNotServed) {
  Fixture f;
  f.p.ops[1].kind = f.p.ops[2].kind = "aten::size";
  expectVerdict(f, 10, Action::None, "sizes-only", false);
  Fixture c;
  c.p.ops[1].kind = c.p.ops[2].kind = "aten::contiguous";
  expectVerdict(c, 10, Action::None, "already-converted", false);
}

TEST(Rules, AnEmptyValueIsNeverConverted) {
  Fixture f; // an empty batch: its consumers' measured "saving" is noise on no data
  f.v().layout.sizes[0] = 0;
  expectVerdict(f, 10, Action::None, "empty-value", false);
  EXPECT_NE(verdictFor(f, 10).reason.find("has no elements"), std::string::npos);
}

TEST(Rules, WhatNoMeasurementSupportsIsNotDecided) {
  Fixture f;
  for (auto& c : f.v().consumers)
    c.measured = false;
  expectVerdict(f, 10, Action::None, "unmeasured", true);
  Fixture r;
  r.p.records[2].consumers[0].measured = false;
  expectVerdict(r, 11, Action::None, "unmeasured", true);
}

TEST(Rules, SmallOrNegativeGainsAreLeftAlone) {
  Fixture f;
  for (auto& c : f.v().consumers)
    c.time_contiguous_ms = c.time_as_is_ms + 0.1; // slower with a contiguous input
  expectVerdict(f, 10, Action::None, "no-gain", false);
  Fixture n;
  for (auto& c : n.v().consumers)
    c.time_contiguous_ms = c.time_as_is_ms - 0.06; // 0.12 saved for 0.1: inside the margin
  expectVerdict(n, 10, Action::None, "noise-margin", false);
  Fixture r; // removing a conversion its consumer needs: 0.2 costs, 0.25 saved
  r.p.records[2].consumers[0].time_noncontiguous_ms = 1.25;
  expectVerdict(r, 11, Action::None, "noise-margin", false);
}

// A verdict is data: the numbers the rule weighed, by name, and the reason is those numbers in
// words (wording.cpp), not a second computation of them.
TEST(Rules, AVerdictCarriesTheNumbersItWeighedAndItsReasonSaysThem) {
  Fixture n;
  for (auto& c : n.v().consumers)
    c.time_contiguous_ms = c.time_as_is_ms - 0.06; // 0.12 saved for 0.1: inside the margin
  const SiteVerdict v = verdictFor(n, 10);
  ASSERT_EQ(v.rule, "noise-margin");
  EXPECT_NEAR(valueOf(v, "saving_ms"), 0.12, 1e-9);
  const double cost = valueOf(v, "cost_ms"), margin = valueOf(v, "margin_ms");
  EXPECT_GT(cost, 0);
  EXPECT_GE(valueOf(v, "saving_ms") - cost, -1e-12);
  EXPECT_LE(valueOf(v, "saving_ms") - cost, margin); // why it is below the margin
  EXPECT_NE(v.reason.find("saving 0.1200 ms"), std::string::npos) << v.reason;
  char text[32];
  std::snprintf(text, sizeof text, "%.4f ms", margin);
  EXPECT_NE(v.reason.find(text), std::string::npos) << v.reason;

  Fixture r; // a removal: the call's time against what its consumers take longer without it
  r.p.records[2].consumers[0].time_noncontiguous_ms = 1.25;
  const SiteVerdict k = verdictFor(r, 11);
  ASSERT_EQ(k.rule, "noise-margin");
  EXPECT_NEAR(valueOf(k, "call_ms"), 0.2, 1e-9);
  EXPECT_NEAR(valueOf(k, "extra_ms"), 0.25, 1e-9);
  EXPECT_NE(k.reason.find("the conversion (0.2000 ms) saves its consumers 0.2500 ms"),
            std::string::npos)
      << k.reason;

  Fixture u; // a blocked site names the consumer that blocks it, as a word
  u.p.records[2].consumers[0].accepts_noncontiguous = false;
  const SiteVerdict b = verdictFor(u, 11);
  ASSERT_EQ(b.rule, "needs-contiguous");
  ASSERT_EQ(b.values.size(), 1u);
  EXPECT_EQ(b.values[0].name, "op");
  EXPECT_EQ(b.reason, std::get<std::string>(b.values[0].value) + " needs a contiguous input");
}

TEST(Rules, AConstantsConversionIsFreeWhenEveryReaderGains) {
  Fixture f;
  f.v().origin = Origin::Constant;
  expectVerdict(f, 10, Action::Sync, "constant-origin", false);
  f.v().consumers[1].time_contiguous_ms = 1.2; // one reader loses: converted per run, if at all
  EXPECT_NE(verdictFor(f, 10).rule, "constant-origin");
}

TEST(Rules, RemovalsNeedARecordedRowMajorConversion) {
  Fixture f;
  f.p.ops[3].inputs = {99}; // not a record
  expectVerdict(f, 11, Action::None, "unrecorded-input", true);
  Fixture m; // .contiguous(memory_format=...) to another format: a real change of layout
  m.p.records[2].contiguous = false;
  expectVerdict(m, 11, Action::None, "other-memory-format", true);
  Fixture v; // a consumer that refuses a non-contiguous input
  v.p.records[2].consumers[0].accepts_noncontiguous = false;
  expectVerdict(v, 11, Action::None, "needs-contiguous", true);
}

TEST(Rules, AConversionOfAContiguousInputIsPureOverheadUnlessAViewNeedsIt) {
  Fixture f;
  f.p.records[1].layout = {{64, 64}, {64, 1}, 0, "float32", "cpu"};
  f.p.records[1].contiguous = true;
  expectVerdict(f, 11, Action::Remove, "contiguous-input", false);
  f.p.ops[4].kind = "aten::view";
  expectVerdict(f, 11, Action::None, "contiguous-input", true);
}

TEST(Rules, AProgramsEditMustSuitEveryUseAndReachItsOwnCode) {
  Fixture f;
  f.p.model.format = ModelFormat::LibtorchProgram;
  f.v().consumers[1].identical_output = false; // one use would change its bits
  expectVerdict(f, 10, Action::None, "program-wide-edit", true);
  Fixture l; // made inside libtorch (no anchor): no expression of the program's own to edit
  l.p.model.format = ModelFormat::LibtorchProgram;
  l.p.ops[0].anchor = {};
  expectVerdict(l, 10, Action::None, "library-internal", false);
}

TEST(Rules, TheLastRuleOfEachKindDecidesWhatTheOthersLeave) {
  // The first verdict wins, and the last rule of each kind decides what the others leave: a
  // fixture site reaches "convert" and "remove" only after every other rule passed.
  Fixture f;
  std::vector<std::string> seen;
  for (const auto& v : siteVerdicts(f.p, f.cost, {}))
    seen.push_back(v.rule);
  EXPECT_EQ(seen, (std::vector<std::string>{"convert", "remove"}));
}
