// makeSchedule: measured-saving versus predicted-cost decisions and peak memory.
#include "xalloc/scheduler/decide.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "xalloc/costfit/classic.h"
#include "xalloc/error.h"
#include "xalloc/memplan/liveness.h"
#include "xalloc/scheduler/problem.h"

#include "build_problem.h"
#include "candidates.h"
#include "memory_internal.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;
using formats::Record;

double medianStandardError(double iqr, std::int64_t n) {
  // sigma ~= IQR / 1.349 for a normal distribution; the median's standard error is
  // 1.2533 * sigma / sqrt(n).
  if (n < 1)
    n = 1;
  return 1.2533 * (iqr / 1.349) / std::sqrt(static_cast<double>(n));
}

namespace {

class Decider {
public:
  Decider(const Profile& p, const formats::Cost& c, const SchedOptions& o)
      : p_(p), predictor_(c), o_(o), floor_ms_(gainFloor(p, o)) {}

  std::vector<Candidate> decideAll() {
    std::vector<Candidate> out;
    for (const Record& r : p_.records) {
      // A loop body's own parameter (origin "loop-carried") is produced by no op of its own:
      // no edit can convert it there.
      if (!r.producer_op || r.consumers.empty() || r.origin == "loop-carried")
        continue;
      const formats::Op* producer = p_.findOp(*r.producer_op);
      XALLOC_EXPECTS(producer != nullptr, "profile was validated");
      if (producer->kind == "aten::contiguous") {
        out.emplace_back();
        out.back().edit = Action::Remove;
        out.back().decision = decideRemove(r, *producer, &out.back());
      } else if (!r.contiguous) {
        out.emplace_back();
        out.back().decision = decideSync(r, *producer, &out.back());
      } else {
        continue;
      }
      keepToOwnCode(out.back(), *producer);
    }
    return out;
  }

private:
  // In a program's profile a site is an expression of the program's own source. An op that
  // libtorch runs for one of its calls (the `t` of the weight in `torch::nn::Linear`'s forward)
  // has no anchor: no source edit can convert it or remove it, so it stays `none`, and the
  // reason says what it would have gained and where.
  void keepToOwnCode(Candidate& c, const formats::Op& producer) const {
    Decision& d = c.decision;
    if (p_.model.format != "libtorch-program" || !producer.anchor.file.empty() ||
        (d.action == Action::None && !c.can_async))
      return;
    std::string where = producer.source.file.empty() ? std::string("a call of the program's")
                                                     : producer.source.location();
    if (!producer.source.text.empty())
      where = "`" + producer.source.text + "` at " + where;
    const std::string gain = d.action == Action::Remove
                                 ? "removing it would save " + fmtMs(d.predicted_cost_ms) +
                                       " for " + fmtMs(d.predicted_saving_ms) +
                                       " more in its consumers"
                                 : "a contiguous copy would save " + fmtMs(d.predicted_saving_ms) +
                                       " for a cost of " + fmtMs(d.predicted_cost_ms);
    d.reason = gain + ", but libtorch makes it (" + producer.kind + " inside " + where +
               "): no expression of the program's own to edit";
    d.action = Action::None;
    c.can_async = false;
  }

  double se(double iqr) const { return medianStandardError(iqr, p_.settings.repeats); }
  static double sq(double x) { return x * x; }

  // A decision must gain more than the noise (z standard errors), than an absolute floor, and
  // than a fraction of the time it trades (the consumers' own time and the conversion's): a
  // process's timings drift together by several percent from one run to the next, which no
  // spread within one run shows, and gains below that do not repeat from run to run.
  double marginFor(double var, double traded_ms) const {
    return std::max({floor_ms_, o_.z * std::sqrt(var), o_.min_relative_gain * traded_ms});
  }

  const char* marginName(double margin) const {
    return margin > floor_ms_ ? "the noise margin" : "the smallest gain worth an edit";
  }

  // The smallest gain worth an edit: an absolute floor, and a fraction of the model's time.
  static double gainFloor(const Profile& p, const SchedOptions& o) {
    double model_ms = 0;
    for (const auto& op : p.ops)
      model_ms += std::max(0.0, op.duration_ms);
    return std::max(o.min_gain_ms, o.min_model_gain * model_ms);
  }

  // How much longer a consumer takes with the other layout, and the variance of that estimate:
  // the paired difference when the profile has it (noise common to each pair cancels), else the
  // difference of the two medians.
  std::pair<double, double> layoutChange(const formats::ConsumerTiming& c, double other_ms,
                                         const std::optional<double>& other_spread) const {
    if (c.delta_ms)
      return {*c.delta_ms, sq(se(c.delta_spread_ms.value_or(0)))};
    return {other_ms - c.time_as_is_ms,
            sq(se(c.time_as_is_spread_ms)) + sq(se(other_spread.value_or(0)))};
  }

  // Ops that read a tensor's sizes or flags, which are the same in every layout (`B, C, H, W =
  // x.shape`): a conversion, or its removal, changes neither their result nor their time.
  // (aten::stride and aten::is_contiguous do see the layout.) xprof does not re-run them.
  bool readsOnlySizes(std::int64_t op_id) const {
    static const std::set<std::string> kinds = {"aten::size",
                                                "aten::dim",
                                                "aten::numel",
                                                "aten::len",
                                                "prim::device",
                                                "prim::dtype",
                                                "prim::layout",
                                                "prim::requires_grad",
                                                "prim::shape",
                                                "prim::is_cuda",
                                                "aten::is_floating_point"};
    const formats::Op* op = p_.findOp(op_id);
    return op && kinds.count(op->kind);
  }

  // View ops only compute new sizes and strides: a contiguous input cannot make them faster.
  bool allViews(const std::vector<std::int64_t>& ops) const {
    static const std::set<std::string> views = {
        "aten::view",    "aten::reshape",    "aten::transpose", "aten::permute", "aten::t",
        "aten::select",  "aten::slice",      "aten::narrow",    "aten::expand",  "aten::unsqueeze",
        "aten::squeeze", "aten::as_strided", "aten::unflatten", "aten::split",   "aten::chunk"};
    for (std::int64_t id : ops) {
      const formats::Op* op = p_.findOp(id);
      if (!op || !views.count(op->kind))
        return false;
    }
    return true;
  }

  // A reshape that gains from a contiguous input copied its input: the layout has no view in
  // the new shape, so the reshape is a conversion of its own.
  bool copyingReshape(const std::vector<std::int64_t>& gaining) const {
    for (std::int64_t id : gaining)
      if (const formats::Op* op = p_.findOp(id); op && op->kind == "aten::reshape")
        return true;
    return false;
  }

  // Times an op runs in one run of the model (loop trips); savings and costs add up over them.
  double runsOf(std::int64_t op_id) const {
    const formats::Op* op = p_.findOp(op_id);
    return op ? static_cast<double>(op->runs) : 1.0;
  }

  // How many runs of `op_id` a measurement on `r` stands for. Consumers and conversions in a
  // loop are measured on one trip's value, the heaviest; when trips differ in size (a head over
  // FPN levels) they add up to the bytes the producer made over all trips, not runs times the
  // heaviest (Record::runs_by_bytes).
  double weightedRuns(const Record& r, std::int64_t op_id, std::int64_t producer_id) const {
    const double runs = runsOf(op_id);
    const double producer_runs = runsOf(producer_id);
    if (!r.runs_by_bytes || !(producer_runs > 0))
      return runs;
    return runs * *r.runs_by_bytes / producer_runs;
  }

  // Times consumer `c` read `r` in one run: a program's profile counts its reads (a weight
  // transposed once and read in a loop), a model's consumer reads it each time it runs.
  double readsOf(const Record& r, const formats::ConsumerTiming& c, std::int64_t producer) const {
    return c.reads ? static_cast<double>(*c.reads) : weightedRuns(r, c.op_id, producer);
  }

  // A program's site: how often its value is made and read in the program's run, when not once.
  static std::string madeAndRead(double made, double read) {
    if (made == 1 && read == 1)
      return "";
    auto times = [](double n) {
      return n == 1   ? std::string("once")
             : n == 2 ? std::string("twice")
                      : std::to_string(std::llround(n)) + " times";
    };
    return " (made " + times(made) + " and read " + times(read) + " in the program's run)";
  }

  // "" for a site that runs once per run of the model, else how often it runs.
  // `weighted`: what its trips add up to in units of the trip measured (weightedRuns).
  static std::string perRun(double runs, double weighted) {
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

  // " (of which 13.8 ms for its fresh output)" when a fresh output is a visible part of a cost.
  static std::string withAllocation(double allocation_ms) {
    if (!(allocation_ms >= 0.0005))
      return "";
    return " (of which " + fmtMs(allocation_ms) + " for its fresh output)";
  }

  Decision base(const Record& r, const formats::Op& producer) const {
    Decision d;
    d.value_id = r.id;
    d.value_name = r.name;
    d.producer = producer.id;
    d.output_index = r.output_index;
    d.anchor = producer.anchor;
    d.layout = r.layout;
    d.action = Action::None;
    return d;
  }

  Decision decideSync(const Record& r, const formats::Op& producer, Candidate* facts) const {
    Decision d = base(r, producer);
    facts->veto = true; // until the numbers decide
    if (r.has_writers) {
      d.reason = "the value is written in place; a copy would change what the write affects";
      return d;
    }
    const bool program = p_.model.format == "libtorch-program";
    double saving = 0, served_ms = 0, reads = 0;
    double var = 0;
    std::size_t unmeasured = 0, differing = 0, converted = 0, relayouting = 0, neutral = 0;
    std::vector<std::int64_t> candidates; // measured consumers with bit-identical outputs
    for (const auto& c : r.consumers) {
      const formats::Op* op = p_.findOp(c.op_id);
      if (op && op->kind == "aten::contiguous") {
        ++converted; // that conversion is a site of its own (keep or remove)
        continue;
      }
      if (readsOnlySizes(c.op_id)) {
        ++neutral; // sees no difference
        continue;
      }
      if (!c.measured || !c.time_contiguous_ms) {
        ++unmeasured;
        continue;
      }
      if (!c.identical_output) {
        ++differing;
        continue;
      }
      if (!c.same_output_layout) {
        ++relayouting;
        continue;
      }
      candidates.push_back(c.op_id);
      const auto [delta, delta_var] =
          layoutChange(c, *c.time_contiguous_ms, c.time_contiguous_spread_ms);
      // A program's edit converts the value for every consumer, so one that is slower with a
      // contiguous input counts against it; in a graph only the consumers that gain read the copy.
      const double gain = -delta;
      if (gain <= 0 && !program)
        continue;
      const double k = readsOf(r, c, producer.id);
      saving += gain * k;
      reads += k;
      var += delta_var * k * k;
      served_ms += c.time_as_is_ms * k;
      d.consumers.push_back(c.op_id);
    }
    // Computed from constants alone (a frozen weight's transpose) and read only by consumers
    // that gain: xrewrite stores the constant in the layout they read, once, so the conversion
    // costs nothing per run.
    const bool constant = r.origin == "constant" && d.consumers.size() == r.consumers.size();
    auto cost = constant
                    ? std::optional<costfit::CostPredictor::Prediction>(
                          costfit::CostPredictor::Prediction{0, 0, "constant", std::nullopt, 0})
                    : predictor_.predict(r.layout);
    if (!cost) {
      d.consumers.clear();
      d.predicted_saving_ms = 0;
      d.reason = "no cost model covers " + r.layout.dtype + " on " + r.layout.device;
      return d;
    }
    // What its fresh output costs beyond the copy (measured layouts only): always for an
    // aten::contiguous, and in the fast form for outputs smaller than those the runtime reuses.
    double allocation = 0;
    if (!constant && cost->allocation_ms &&
        (o_.form != "fast" || r.layout.bytes() < kFastFormReusedOutputBytes)) {
      allocation = *cost->allocation_ms;
      cost->ms += allocation;
      cost->spread_ms = std::hypot(cost->spread_ms, cost->allocation_spread_ms);
    }
    // A conversion runs wherever its value is made: as often as the producer.
    const double runs = weightedRuns(r, producer.id, producer.id);
    cost->ms *= runs;
    cost->spread_ms *= runs;
    allocation *= runs;
    d.predicted_cost_ms = cost->ms;
    var += sq(se(cost->spread_ms));
    d.predicted_saving_ms = saving;
    const double margin = marginFor(var, served_ms + std::max(0.0, cost->ms));
    if (cost->ms < 0 || !std::isfinite(cost->ms))
      throw InputError("xsched", "the cost model predicts " + std::to_string(cost->ms) +
                                     " ms for converting " + r.layout.key() +
                                     "; conversion costs must be non-negative");
    facts->saving = saving;
    facts->cost = cost->ms;
    facts->conversions = runs;
    facts->margin = margin;
    // A program's edit converts the expression's value for every use of it, not only for the
    // consumers that gain: each one must be known to give the same bits and layout.
    if (program && !candidates.empty() && unmeasured + differing + relayouting > 0) {
      d.consumers = candidates;
      d.reason = "the edit would convert the value for every use of it, and " +
                 std::to_string(unmeasured + differing + relayouting) + " of " +
                 std::to_string(r.consumers.size()) + " consumer(s) " +
                 (differing     ? "give other output bits"
                  : relayouting ? "change output layout"
                                : "could not be measured") +
                 " with a contiguous input";
      return d;
    }
    // Hidden in an idle window, the conversion costs the critical path only the hand-off.
    // Idle windows are moments of one run; a value made in a loop is made at many.
    facts->can_async = !constant && !r.in_loop && !d.consumers.empty() &&
                       saving - o_.async_overhead_ms * runs > margin;
    if (d.consumers.empty() || saving - cost->ms <= margin) {
      const bool reshape_copies = copyingReshape(d.consumers);
      // Record the consumers a conversion would serve, so the decision can be reviewed.
      d.consumers = candidates;
      // No consumer a conversion could serve: ruled out (a veto for a program's other calls of
      // the expression). Otherwise it only gains too little.
      facts->veto = candidates.empty() && converted + neutral < r.consumers.size();
      if (differing > 0 && candidates.empty())
        d.reason = "a contiguous input changes the consumer's output bits";
      else if (relayouting > 0 && candidates.empty())
        d.reason = "a contiguous input changes the layout of the consumer's output, and so what "
                   "runs after it (not measured)";
      else if (neutral == r.consumers.size())
        d.reason = "its consumers read only its sizes, which no layout changes";
      else if (converted > 0 && converted + neutral == r.consumers.size())
        d.reason = "already converted by an existing aten::contiguous";
      else if (unmeasured == r.consumers.size())
        d.reason = "no consumer could be measured in isolation";
      else if (!candidates.empty() && allViews(candidates) && reshape_copies)
        d.reason = "aten::reshape copies it already (this layout cannot be viewed in the new "
                   "shape): a conversion would only move that copy";
      else if (!candidates.empty() && allViews(candidates))
        d.reason = "its consumers are views, which read no data";
      else if (saving <= 0)
        d.reason = "no consumer is faster with a contiguous input";
      else
        d.reason = "saving " + fmtMs(saving) + " does not beat the " + cost->model + " cost " +
                   fmtMs(cost->ms) + withAllocation(allocation) + " by " + marginName(margin) +
                   " " + fmtMs(margin);
      return d;
    }
    facts->veto = false;
    d.action = Action::Sync;
    d.reason = "saves " + fmtMs(saving) + " in " + std::to_string(d.consumers.size()) +
               " consumer(s)" +
               (constant ? "; the value comes from constants, so it is converted once, into the "
                           "model, and costs nothing per run"
                         : " for a " + cost->model + " cost of " + fmtMs(cost->ms) +
                               withAllocation(allocation)) +
               (program ? madeAndRead(runs, reads) : perRun(runsOf(producer.id), runs));
    return d;
  }

  Decision decideRemove(const Record& r, const formats::Op& conv, Candidate* facts) const {
    Decision d = base(r, conv);
    facts->veto = true; // until the numbers decide
    for (const auto& c : r.consumers)
      d.consumers.push_back(c.op_id);
    d.predicted_cost_ms = conv.duration_ms;
    const Record* src = conv.inputs.empty() ? nullptr : p_.findRecord(conv.inputs.front());
    if (!src) {
      d.reason = "the conversion's input was not recorded";
      return d;
    }
    if (src->producer_op)
      d.input_anchor = p_.findOp(*src->producer_op)->anchor;
    if (!r.contiguous) {
      // `.contiguous(memory_format=torch.channels_last)` and the like: a real change of
      // layout, which no rewriter removes (only plain `.contiguous()` calls).
      d.reason = "it converts to another memory format, not to row-major; only plain "
                 ".contiguous() calls are removed";
      return d;
    }
    if (src->contiguous) {
      // Converting a tensor that is already contiguous returns that very tensor: removing the
      // call cannot change results, aliasing or any consumer's speed. It only saves the call,
      // unless a consumer needs a contiguous input: then the call guards the shapes not
      // profiled (GPT-2's merge_heads is contiguous in a one-token decoding step, not in the
      // prompt's), and xrewrite would refuse the removal anyway.
      for (const auto& c : r.consumers) {
        const formats::Op* op = p_.findOp(c.op_id);
        if (!c.accepts_noncontiguous || (op && op->kind == "aten::view")) {
          d.reason = (op ? op->kind : "op " + std::to_string(c.op_id)) +
                     " needs a contiguous input; the input is contiguous at these shapes, but "
                     "may not be at others";
          return d;
        }
      }
      d.action = Action::Remove;
      facts->veto = false;
      facts->saving = conv.duration_ms;
      d.reason = "the input is already contiguous: the call is pure overhead (" +
                 fmtMs(conv.duration_ms) + ")";
      return d;
    }
    if (r.has_writers || src->has_writers) {
      d.reason = "the conversion's input or output is written in place";
      return d;
    }
    double extra = 0; // how much longer the consumers take without the conversion
    double served_ms = 0;
    double var = sq(se(conv.duration_spread_ms));
    for (const auto& c : r.consumers) {
      const formats::Op* op = p_.findOp(c.op_id);
      std::string name = op ? op->kind : "op " + std::to_string(c.op_id);
      if (readsOnlySizes(c.op_id))
        continue;
      if (!c.accepts_noncontiguous) {
        d.reason = name + " needs a contiguous input";
        return d;
      }
      if (!c.measured || !c.time_noncontiguous_ms) {
        d.reason = name + " could not be measured without the conversion";
        return d;
      }
      if (!c.identical_output) {
        d.reason = name + " gives different output bits without the conversion";
        return d;
      }
      if (!c.same_output_layout) {
        d.reason = name + "'s output changes layout without the conversion";
        return d;
      }
      const auto [delta, delta_var] =
          layoutChange(c, *c.time_noncontiguous_ms, c.time_noncontiguous_spread_ms);
      const double k = readsOf(r, c, conv.id);
      extra += delta * k;
      var += delta_var * k * k;
      served_ms += c.time_as_is_ms * k;
    }
    d.predicted_saving_ms = extra;
    const double margin = marginFor(var, served_ms + conv.duration_ms);
    facts->veto = false;
    facts->saving = conv.duration_ms;
    facts->cost = extra;
    facts->margin = margin;
    if (conv.duration_ms - extra <= margin) {
      d.reason = "the conversion (" + fmtMs(conv.duration_ms) + ") saves its consumers " +
                 fmtMs(extra) + "; removing it gains less than " + marginName(margin) + " " +
                 fmtMs(margin);
      return d;
    }
    d.action = Action::Remove;
    d.reason = "costs " + fmtMs(conv.duration_ms) + " but saves its consumers only " + fmtMs(extra);
    return d;
  }

  const Profile& p_;
  costfit::CostPredictor predictor_;
  SchedOptions o_;
  double floor_ms_;
};

} // namespace

formats::Schedule makeSchedule(const Profile& p, const formats::Cost& cost, const SchedOptions& o) {
  formats::Schedule s;
  s.model = p.model;
  s.device = p.device;
  // What xrewrite verifies on: the file itself when there was one (its values, not random
  // ones of its shapes: integer inputs such as token ids have a valid range only the file knows).
  s.input_file = p.settings.input_file;
  if (s.input_file.empty())
    s.inputs = p.settings.inputs;
  s.ops = p.ops;
  s.gpu_idle_events = p.gpu_idle_events;
  std::vector<Candidate> cands = Decider(p, cost, o).decideAll();
  for (const auto& group : editGroups(p, cands))
    reconcile(cands, group);

  auto& m = s.summary;
  for (const auto& op : p.ops)
    m.predicted_time_before_ms += op.duration_ms;
  m.peak_bytes_before = predictedPeakBytes(p, {});
  m.memory_budget_bytes = o.memory_budget_bytes;
  m.window_safety = o.window_safety;
  m.form = o.form;
  if (o.memory_budget_bytes && *o.memory_budget_bytes < m.peak_bytes_before) {
    const std::int64_t least = smallestFeasiblePeak(p, cands);
    if (*o.memory_budget_bytes < least)
      throw InputError("xsched", "memory budget " + std::to_string(*o.memory_budget_bytes) +
                                     " bytes is impossible: the smallest feasible budget is " +
                                     std::to_string(least) + " bytes (the model's own peak is " +
                                     std::to_string(m.peak_bytes_before) + " bytes)");
  }

  Built built = buildProblem(p, cands, o);
  Solution sol = solve(built.problem, o.limits);
  m.solver = sol.method;
  m.optimal = sol.optimal;
  m.gap = sol.gap();
  m.nodes = sol.nodes;

  // The per-site rules first decided alone; the solver's choice now overrides them.
  for (std::size_t i = 0; i < cands.size(); ++i) {
    Decision d = cands[i].decision;
    const std::size_t site = built.site_of[i];
    const Option& chosen =
        built.problem.sites[site].options[static_cast<std::size_t>(sol.choice[site])];
    const auto action = static_cast<Action>(chosen.kind);
    if (action == Action::Async) {
      const auto* w = findWindow(p, built.window_ids[static_cast<std::size_t>(chosen.window)]);
      d.action = Action::Async;
      d.window_id = w->id;
      d.predicted_cost_ms = cands[i].cost;
      d.reason = "saves " + fmtMs(cands[i].saving) + " in " + std::to_string(d.consumers.size()) +
                 " consumer(s) for a hand-off of " + fmtMs(o.async_overhead_ms) + "; the " +
                 fmtMs(cands[i].cost) + " conversion is hidden in " + w->kind + " window " +
                 std::to_string(w->id) + " (ops " + std::to_string(w->after_op_id) + ".." +
                 std::to_string(w->before_op_id) + ", " + fmtMs(w->duration_ms) + ")";
    } else if (action == Action::None && d.action != Action::None) {
      d.action = Action::None;
      d.reason = o.memory_budget_bytes ? "dropped to stay within the memory budget"
                                       : "dropped by the solver";
    }
    s.decisions.push_back(std::move(d));
  }
  m.predicted_time_after_ms = m.predicted_time_before_ms - sol.gain;
  m.predicted_time_bound_ms = m.predicted_time_before_ms - sol.bound;
  m.peak_bytes_after = predictedPeakBytes(p, s.decisions);
  XALLOC_EXPECTS(!o.memory_budget_bytes || m.peak_bytes_after <= *o.memory_budget_bytes,
                 "the plan's peak " + std::to_string(m.peak_bytes_after) +
                     " stays within the budget the solver enforced");
  return s;
}

} // namespace xalloc::scheduler
