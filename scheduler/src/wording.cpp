// Every reason xsched gives, from a decision's rule, blocker and named values (wording.h). One
// sentence per rule; a value the sentence needs and the rule did not give is a bug in the rule,
// caught here (XALLOC_EXPECTS) and by tests/unit/test_rules.cpp, which renders every verdict.
#include "wording.h"

#include <cmath>
#include <cstdio>
#include <iterator>

#include "xalloc/error.h"

namespace xalloc::scheduler::wording {

using formats::Blocker;

std::string fmtMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f ms", ms);
  return buf;
}

std::string fmtSci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", x);
  return buf;
}

std::string pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
  return buf;
}

namespace {

// A decision's values by name, for its sentence.
class Args {
public:
  Args(const formats::NamedValues& v, std::string_view rule) : v_(v), rule_(rule) {}
  bool has(std::string_view name) const { return find(name) != nullptr; }
  double num(std::string_view name) const {
    const auto* n = std::get_if<double>(&get(name).value);
    XALLOC_EXPECTS(n != nullptr, "rule " + std::string(rule_) + "'s value '" + std::string(name) +
                                     "' is a number");
    return *n;
  }
  const std::string& word(std::string_view name) const {
    const auto* w = std::get_if<std::string>(&get(name).value);
    XALLOC_EXPECTS(w != nullptr,
                   "rule " + std::string(rule_) + "'s value '" + std::string(name) + "' is a word");
    return *w;
  }
  bool flag(std::string_view name) const { return has(name) && num(name) != 0; }
  std::string ms(std::string_view name) const { return fmtMs(num(name)); }
  std::string sci(std::string_view name) const { return fmtSci(num(name)); }
  std::string count(std::string_view name) const { return std::to_string(std::llround(num(name))); }
  std::string_view rule() const { return rule_; }
  const formats::NamedValues& values() const { return v_; }

private:
  const formats::NamedValue* find(std::string_view name) const {
    for (const auto& v : v_)
      if (v.name == name)
        return &v;
    return nullptr;
  }
  const formats::NamedValue& get(std::string_view name) const {
    const formats::NamedValue* v = find(name);
    XALLOC_EXPECTS(v != nullptr,
                   "rule " + std::string(rule_) + " gives the value '" + std::string(name) + "'");
    return *v;
  }
  const formats::NamedValues& v_;
  std::string_view rule_;
};

// " (of which 13.8 ms for its fresh output)" when a fresh output is a visible part of a cost.
std::string withAllocation(const Args& a) {
  const double ms = a.num("allocation_ms");
  if (!(ms >= 0.0005))
    return "";
  return " (of which " + fmtMs(ms) + " for its fresh output)";
}

std::string marginName(const Args& a) {
  return a.word("margin") == "floor" ? "the smallest gain worth an edit" : "the noise margin";
}

std::string times(double n) {
  return n == 1   ? std::string("once")
         : n == 2 ? std::string("twice")
                  : std::to_string(std::llround(n)) + " times";
}

// How often the site runs, when not once per run: a program's value made and read in the
// program's run; a model's producer per run of the model (and what its trips add up to by
// bytes, when not its runs).
std::string howOften(const Args& a) {
  if (a.has("made")) {
    const double made = a.num("made"), read = a.num("read");
    if (made == 1 && read == 1)
      return "";
    return " (made " + times(made) + " and read " + times(read) + " in the program's run)";
  }
  const double runs = a.num("runs"), weighted = a.num("runs_by_bytes");
  if (runs == 1)
    return "";
  char buf[160];
  if (std::abs(weighted - runs) < 0.005 * runs)
    std::snprintf(buf, sizeof buf, " (it runs %.0f times per run of the model)", runs);
  else
    std::snprintf(buf, sizeof buf,
                  " (it runs %.0f times per run of the model; by their bytes its trips add up "
                  "to %.2f of the one measured)",
                  runs, weighted);
  return buf;
}

std::string saves(const Args& a) {
  return "saves " + a.ms("saving_ms") + " in " + a.count("consumers") + " consumer(s)";
}

// "`w.t()` at net.cpp:12:7" or "a call of the program's": where libtorch made the value.
std::string libtorchMade(const Args& a) {
  std::string where =
      a.word("location").empty() ? std::string("a call of the program's") : a.word("location");
  if (!a.word("source").empty())
    where = "`" + a.word("source") + "` at " + where;
  return "libtorch makes it (" + a.word("op") + " inside " + where +
         "): no expression of the program's own to edit";
}

// --- a value a conversion could make contiguous (the sync rules) -------------------------------

std::string valueSentence(const Args& a, Blocker blocker) {
  const std::string_view r = a.rule();
  if (r == "written-in-place")
    return "the value is written in place; a copy would change what the write affects";
  if (r == "empty-value")
    return "the value " + a.word("sizes") + " has no elements: a conversion would order nothing";
  if (r == "no-cost-model")
    return "no cost model covers " + a.word("dtype") + " on " + a.word("device");
  if (r == "program-wide-edit")
    return "the edit would convert the value for every use of it, and " + a.count("unknown") +
           " of " + a.count("all_consumers") + " consumer(s) " +
           (blocker == Blocker::OutputBits     ? "give other output bits"
            : blocker == Blocker::OutputLayout ? "change output layout"
                                               : "could not be measured") +
           " with a contiguous input";
  if (r == "output-bits")
    return a.flag("exact") ? "a contiguous input changes the consumer's output bits (--exact)"
                           : "a contiguous input changes the consumer's output bits by more than "
                             "the tolerance";
  if (r == "output-layout")
    return "a contiguous input changes the layout of the consumer's output, and so what runs "
           "after it (not measured)";
  if (r == "sizes-only")
    return "its consumers read only its sizes, which no layout changes";
  if (r == "already-converted")
    return "already converted by an existing aten::contiguous";
  if (r == "unmeasured")
    return "no consumer could be measured in isolation";
  if (r == "copying-reshape")
    return "aten::reshape copies it already (this layout cannot be viewed in the new shape): a "
           "conversion would only move that copy";
  if (r == "views")
    return "its consumers are views, which read no data";
  if (r == "no-gain")
    return "no consumer is faster with a contiguous input";
  if (r == "noise-margin")
    return "saving " + a.ms("saving_ms") + " does not beat the " + a.word("cost_model") + " cost " +
           a.ms("cost_ms") + withAllocation(a) + " by " + marginName(a) + " " + a.ms("margin_ms");
  if (r == "constant-origin")
    return saves(a) +
           "; the value comes from constants, so it is converted once, into the model, and costs "
           "nothing per run" +
           howOften(a);
  if (r == "convert")
    return saves(a) + " for a " + a.word("cost_model") + " cost of " + a.ms("cost_ms") +
           withAllocation(a) + howOften(a) +
           (a.num("through") == 0 ? std::string()
                                  : "; measured through what runs after " + a.count("through") +
                                        " consumer(s) whose output changes layout with it");
  if (r == "library-internal")
    return "a contiguous copy would save " + a.ms("saving_ms") + " for a cost of " +
           a.ms("cost_ms") + ", but " + libtorchMade(a);
  return "";
}

// --- an existing aten::contiguous (the remove and keep rules) ---------------------------------

std::string conversionSentence(const Args& a, Blocker blocker) {
  const std::string_view r = a.rule();
  if (r == "unrecorded-input")
    return "the conversion's input was not recorded";
  if (r == "other-memory-format")
    return "it converts to another memory format, not to row-major; only plain .contiguous() "
           "calls are removed";
  if (r == "contiguous-input")
    return blocker == Blocker::NeedsContiguous
               ? a.word("op") +
                     " needs a contiguous input; the input is contiguous at these shapes, but "
                     "may not be at others"
               : "the input is already contiguous: the call is pure overhead (" + a.ms("call_ms") +
                     ")";
  if (r == "written-in-place")
    return "the conversion's input or output is written in place";
  if (r == "needs-contiguous")
    return a.word("op") + " needs a contiguous input";
  if (r == "unmeasured")
    return a.word("op") + " could not be measured without the conversion";
  if (r == "output-bits")
    return a.word("op") + (a.flag("exact") ? " gives different output bits without the "
                                             "conversion (--exact)"
                                           : " changes its output bits by more than the "
                                             "tolerance without the conversion");
  if (r == "output-layout")
    return a.word("op") + "'s output changes layout without the conversion";
  if (r == "noise-margin")
    return "the conversion (" + a.ms("call_ms") + ") saves its consumers " + a.ms("extra_ms") +
           "; removing it gains less than " + marginName(a) + " " + a.ms("margin_ms");
  if (r == "remove")
    return "costs " + a.ms("call_ms") + " but saves its consumers only " + a.ms("extra_ms");
  if (r == "fuse-existing")
    return "fused into its producer: " + a.word("fused_op") + " writes " + a.word("input") +
           " row-major itself, measured " + a.ms("fusion_saving_ms") +
           " faster than it and this conversion, which goes (" +
           conversionSentence(
               Args(a.values(), a.word("kept_rule")),
               formats::fromString<Blocker>(a.word("kept_blocker")).value_or(Blocker::None)) +
           ")";
  if (r == "library-internal")
    return "removing it would save " + a.ms("cost_ms") + " for " + a.ms("saving_ms") +
           " more in its consumers, but " + libtorchMade(a);
  return "";
}

// --- the plan's own rules, the same for every site --------------------------------------------

std::string planSentence(const Args& a, Blocker blocker) {
  const std::string_view r = a.rule();
  if (r == "solver" && blocker == Blocker::None)
    return saves(a) + " for a hand-off of " + a.ms("handoff_ms") + "; the " + a.ms("cost_ms") +
           " conversion is hidden in " + a.word("window_kind") + " window " + a.count("window") +
           " (ops " + a.count("after_op") + ".." + a.count("before_op") + ", " + a.ms("window_ms") +
           ")";
  if (r == "solver")
    return "dropped by the solver";
  if (r == "memory-budget")
    return "dropped to stay within the memory budget";
  if (r == "layout-region")
    return "inside layout region " + a.count("region") +
           ", which runs in another layout as a whole";
  if (r == "overlap")
    return "overlaps the conversion of value " + a.count("kept_value") + " (" +
           a.ms("kept_net_ms") +
           " net), which was weighed through the ops that read this one; this gains less (" +
           a.ms("net_ms") + " net)";
  return "";
}

// --- a layout region ---------------------------------------------------------------------------

std::string regionList(const std::string& ids) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t comma; (comma = ids.find(',', start)) != std::string::npos; start = comma + 1)
    parts.push_back(ids.substr(start, comma - start));
  parts.push_back(ids.substr(start));
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s;
}

// Why a layout may not be chosen for a region (regions.cpp's Ineligible): "" when it may.
std::string ineligible(const Args& a, Blocker blocker) {
  const std::string at = a.has("at") ? " at " + a.word("at") : "";
  switch (blocker) {
  case Blocker::OutputBits: {
    if (!a.has("output_error"))
      return "changes the outputs' bits (--exact)" + at;
    std::string s = "moves the outputs by " + a.sci("output_error") +
                    " of their scale, beyond the tolerance " + a.sci("tolerance");
    if (a.has("rounding_error"))
      s += " and beyond twice what one ulp of its inputs moves them (" + a.sci("rounding_error") +
           ")";
    if (a.has("tolerance_needed"))
      s += "; --tolerance " + a.sci("tolerance_needed") + " would let it in";
    return s + at;
  }
  case Blocker::NeedsRuntime:
    return "needs the runtime's ops (xsched --form fast)";
  case Blocker::OtherShape:
    return a.has("slower_ms") ? "is slower" + at + " by " + a.ms("slower_ms")
                              : "is not a region" + at;
  case Blocker::Unmeasured:
    return "was not measured" + at;
  case Blocker::BelowMargin:
    return a.has("gain_ms")
               ? "saves " + a.ms("gain_ms") + ", within the noise margin " + a.ms("margin_ms")
               : "is faster beyond the noise at none of the shapes";
  default:
    return "";
  }
}

std::string regionSentence(const Args& a, Blocker blocker) {
  const std::string what =
      a.flag("linear") ? "a linear" + std::string(a.num("ops") > 1 ? " and its activation" : "")
                       : a.count("ops") + " ops, " + a.count("convolutions") + " convolution(s)";
  const std::string head = "region " + a.count("region") + " (" + what + ")";
  if (blocker == Blocker::Unfrozen)
    return head + " left as it is: the model was profiled unfrozen (profile it with xprof "
                  "--freeze, and rewrite with xrewrite --freeze, to re-lay its weights once)";
  if (blocker == Blocker::Unmeasured && !a.has("layout"))
    return head + " not measured" + (a.word("note").empty() ? "" : ": " + a.word("note"));
  if (blocker != Blocker::None)
    return head + " left as it is" +
           (a.has("layout") ? ": " + a.word("layout") + " " + ineligible(a, blocker)
                            : ": no layout measured faster");
  const std::string conversions = " measured with its " + a.count("entries") + " entry and " +
                                  a.count("exits") + " exit conversion(s) (";
  std::string s = head + " runs as " + a.word("layout");
  if (a.has("shapes")) {
    s += " at every shape profiled: ";
    for (long k = 0; k < std::lround(a.num("shapes")); ++k) {
      const std::string i = std::to_string(k);
      s += (k ? ", " : "") + a.word("shape_" + i) + " " + a.ms("as_is_ms_" + i) + " -> " +
           a.ms("after_ms_" + i);
    }
    s += conversions + pct(a.num("speedup")) + " faster, geometric mean)";
  } else {
    s += ": " + a.ms("as_is_ms") + " -> " + a.ms("after_ms") + conversions +
         pct(a.num("gain_ms") / a.num("as_is_ms")) + " faster, margin " + a.ms("margin_ms");
    if (a.has("rounds"))
      s += ": faster in " + a.count("faster_rounds") + " of " + a.count("rounds") +
           " paired rounds, which outliers of either cannot sway; their spread alone would ask "
           "more";
    s += ")";
    if (a.has("shared_with"))
      s += std::string(a.flag("clear") ? "; " : "; within the noise on its own, but ") +
           "its border(s) with region(s) " + regionList(a.word("shared_with")) +
           ", channels-last as well, convert nothing: " + a.ms("border_ms") +
           " saved there (predicted)";
  }
  if (a.has("output_error")) {
    s += "; outputs within " + a.sci("output_error") + " of their scale";
    if (a.has("rounding_error"))
      s += ", within twice what one ulp of its inputs moves them (" + a.sci("rounding_error") +
           "): float32 rounding's own effect";
  }
  return s;
}

std::string say(Site site, std::string_view rule, Blocker blocker, const formats::NamedValues& v) {
  const Args a(v, rule);
  if (std::string s = planSentence(a, blocker); !s.empty())
    return s;
  std::string s = site == Site::Value        ? valueSentence(a, blocker)
                  : site == Site::Conversion ? conversionSentence(a, blocker)
                                             : regionSentence(a, blocker);
  XALLOC_EXPECTS(!s.empty(), "wording.cpp has a sentence for rule '" + std::string(rule) + "'");
  // A conversion its producer makes itself (ProducerFusion; decide_sites.cpp).
  if (site == Site::Value && a.has("fused_op"))
    s += "; fused into its producer (" + a.word("fused_op") +
         " writes it row-major itself, measured " + a.ms("fusion_saving_ms") +
         " faster than converting after it)";
  return s;
}

} // namespace

std::string reason(Site site, const formats::Decision& d) {
  return say(site, d.rule, d.blocker, d.values);
}

std::string groupReason(Site site, const formats::Decision& d, const formats::Decision* member) {
  const Args a(d.values, "one-edit");
  const std::string calls =
      "one edit changes all " + a.count("calls") + " calls of this expression";
  if (!member)
    return say(site,
               a.has("own_rule") ? std::string_view(a.word("own_rule")) : std::string_view(d.rule),
               d.blocker, d.values) +
           "; " + calls + ": together they gain " + a.ms("group_net_ms") + " (margin " +
           a.ms("group_margin_ms") + ")";
  const std::string on = "the call on " + member->layout.sizesText() + ": " + reason(site, *member);
  if (d.blocker == Blocker::BelowMargin && !a.flag("vetoed"))
    return calls + ", and together they gain " + a.ms("group_net_ms") +
           ", not more than the margin " + a.ms("group_margin_ms") + " (" + on + ")";
  return calls + ", and it is ruled out for " + on;
}

} // namespace xalloc::scheduler::wording
