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
#include "regions.h"
#include "rules/rule.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;
using formats::Record;

bool withinTolerance(const formats::ConsumerTiming& c, double tolerance) {
  return withinTolerance(c.identical_output, c.output_error, tolerance);
}

double medianStandardError(double iqr, std::int64_t n) {
  // sigma ~= IQR / 1.349 for a normal distribution; the median's standard error is
  // 1.2533 * sigma / sqrt(n).
  if (n < 1)
    n = 1;
  return 1.2533 * (iqr / 1.349) / std::sqrt(static_cast<double>(n));
}

namespace {

// The smallest gain worth an edit: an absolute floor, and a fraction of the model's time (for
// the sites and the region decisions alike).
double gainFloor(const Profile& p, const SchedOptions& o) {
  double model_ms = 0;
  for (const auto& op : p.ops)
    model_ms += std::max(0.0, op.duration_ms);
  return std::max(o.min_gain_ms, o.min_model_gain * model_ms);
}

class Decider {
public:
  Decider(const Profile& p, const formats::Cost& c, const SchedOptions& o)
      : p_(p), predictor_(c), o_(o), floor_ms_(gainFloor(p, o)) {}

  std::vector<Candidate> decideAll() {
    std::vector<Candidate> out;
    for (const Record& r : p_.records) {
      // A loop body's own parameter (origin "loop-carried") is produced by no op of its own:
      // no edit can convert it there.
      if (!r.producer_op || r.consumers.empty() || r.origin == formats::Origin::LoopCarried)
        continue;
      const formats::Op* producer = p_.findOp(*r.producer_op);
      XALLOC_EXPECTS(producer != nullptr, "profile was validated");
      if (producer->kind == "aten::contiguous") {
        out.emplace_back();
        out.back().edit = Action::Remove;
        decideRemove(r, *producer, out.back());
      } else if (!r.contiguous) {
        out.emplace_back();
        decideSync(r, *producer, out.back());
      } else {
        continue;
      }
      checkEdit(out.back(), *producer);
    }
    return out;
  }

private:
  // A verdict that edits, checked by the edit rules (a site no source edit can reach).
  void checkEdit(Candidate& c, const formats::Op& producer) const {
    for (const auto& rule : rules::editRules())
      if (auto reason = rule.check({p_, producer, c.decision, c.can_async})) {
        c.decision.reason = std::move(*reason);
        c.decision.action = Action::None;
        c.can_async = false;
        c.rule = rule.name;
        return;
      }
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

  // What a consumer whose output changes layout (`c`, same_output_layout false) leads to: the
  // summed change of the consumers of its outputs, each re-run with the output the other layout
  // gives (ConsumerTiming::downstream), its variance, and their time as they are. Nothing when
  // one of those consumers was not followed, not measured, not within the tolerance, or itself
  // changes layout and was not followed further: then what the change does is not known. Each
  // is counted once per read of the value by `c` (what `c` makes, they read).
  struct After {
    double delta = 0, var = 0, as_is_ms = 0;
  };
  std::optional<After> followed(const formats::ConsumerTiming& c) const {
    const formats::Op* op = p_.findOp(c.op_id);
    if (!op || c.downstream.empty())
      return std::nullopt;
    rules::OpKinds kinds{p_};
    After a;
    std::size_t reached = 0;
    for (std::int64_t out : op->outputs) {
      const Record* r = p_.findRecord(out);
      if (!r)
        continue;
      for (const auto& e : r->consumers) {
        if (kinds.readsOnlySizes(e.op_id))
          continue;
        const auto d = std::find_if(c.downstream.begin(), c.downstream.end(), [&](const auto& x) {
          return x.op_id == e.op_id && x.input_index == e.input_index;
        });
        if (d == c.downstream.end() || !d->measured || !d->time_contiguous_ms ||
            !withinTolerance(*d, o_.tolerance))
          return std::nullopt;
        const auto [dd, dv] =
            layoutChange(*d, *d->time_contiguous_ms, d->time_contiguous_spread_ms);
        if (!d->same_output_layout) {
          const auto further = followed(*d);
          if (!further)
            return std::nullopt;
          a.delta += further->delta;
          a.var += further->var;
          a.as_is_ms += further->as_is_ms;
        }
        a.delta += dd;
        a.var += dv;
        a.as_is_ms += d->time_as_is_ms;
        ++reached;
      }
    }
    if (reached == 0)
      return std::nullopt;
    return a;
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

  // The facts the sync rules read: each consumer classified and weighed, the conversion priced.
  rules::SyncSite syncFacts(const Record& r, const formats::Op& producer) const {
    rules::SyncSite s(r, producer, p_);
    s.exact = o_.tolerance <= 0;
    double var = 0, served_ms = 0; // of the saving, and the consumers' time it trades
    s.program = p_.model.format == formats::ModelFormat::LibtorchProgram;
    for (const auto& c : r.consumers) {
      const formats::Op* op = p_.findOp(c.op_id);
      if (op && op->kind == "aten::contiguous") {
        ++s.converted; // that conversion is a site of its own (keep or remove)
        continue;
      }
      if (s.ops.readsOnlySizes(c.op_id)) {
        ++s.neutral; // sees no difference
        continue;
      }
      if (!c.measured || !c.time_contiguous_ms) {
        ++s.unmeasured;
        continue;
      }
      if (!withinTolerance(c, o_.tolerance)) {
        ++s.differing;
        continue;
      }
      auto [delta, delta_var] = layoutChange(c, *c.time_contiguous_ms, c.time_contiguous_spread_ms);
      if (!c.same_output_layout) {
        // Its output changes layout: what runs after it was measured too, or nothing is known.
        const auto after = followed(c);
        if (!after) {
          ++s.relayouting;
          continue;
        }
        delta += after->delta;
        delta_var += after->var;
        served_ms += after->as_is_ms * readsOf(r, c, producer.id);
        s.through.push_back(c.op_id);
      }
      s.candidates.push_back(c.op_id);
      // A program's edit converts the value for every consumer, so one that is slower with a
      // contiguous input counts against it; in a graph only the consumers that gain read the copy.
      const double gain = -delta;
      if (gain <= 0 && !s.program)
        continue;
      const double k = readsOf(r, c, producer.id);
      s.saving += gain * k;
      s.reads += k;
      var += delta_var * k * k;
      served_ms += c.time_as_is_ms * k;
      s.gaining.push_back(c.op_id);
    }
    // Computed from constants alone (a frozen weight's transpose) and read only by consumers
    // that gain: xrewrite stores the constant in the layout they read, once, so the conversion
    // costs nothing per run.
    s.constant = r.origin == formats::Origin::Constant && s.gaining.size() == r.consumers.size();
    auto cost = s.constant
                    ? std::optional<costfit::CostPredictor::Prediction>(
                          costfit::CostPredictor::Prediction{0, 0, "constant", std::nullopt, 0})
                    : predictor_.predict(r.layout);
    s.priced = cost.has_value();
    if (!cost)
      return s;
    // What its fresh output costs beyond the copy (measured layouts only): always for an
    // aten::contiguous, and in the fast form for outputs smaller than those the runtime reuses.
    if (!s.constant && cost->allocation_ms &&
        (o_.form != formats::RewriteForm::Fast || r.layout.bytes() < kFastFormReusedOutputBytes)) {
      s.allocation = *cost->allocation_ms;
      cost->ms += s.allocation;
      cost->spread_ms = std::hypot(cost->spread_ms, cost->allocation_spread_ms);
    }
    // A conversion runs wherever its value is made: as often as the producer.
    s.runs = weightedRuns(r, producer.id, producer.id);
    // Fused into its producer, the conversion's pass is gone: the measured difference comes off.
    // Only when every consumer gains (all of them then read the row-major output).
    if (const auto& f = r.producer_fusion;
        f && !s.constant && !s.program && s.converted == 0 &&
        s.gaining.size() == r.consumers.size() &&
        withinTolerance(f->identical_output, f->output_error, o_.tolerance) &&
        -f->delta_ms > std::max(floor_ms_ / s.runs, o_.z * se(f->delta_spread_ms))) {
      s.fused_template = f->template_input;
      s.fusion_saving = std::min(-f->delta_ms, cost->ms) * s.runs;
      cost->ms = std::max(0.0, cost->ms + f->delta_ms);
      cost->spread_ms = std::hypot(cost->spread_ms, f->delta_spread_ms);
    }
    s.cost = cost->ms * s.runs;
    s.allocation *= s.runs;
    s.cost_model = cost->model;
    var += sq(se(cost->spread_ms * s.runs));
    if (s.cost < 0 || !std::isfinite(s.cost))
      throw InputError("xsched", "the cost model predicts " + std::to_string(s.cost) +
                                     " ms for converting " + r.layout.key() +
                                     "; conversion costs must be non-negative");
    s.margin = marginFor(var, served_ms + std::max(0.0, s.cost));
    s.margin_is_floor = !(s.margin > floor_ms_);
    s.made_and_read =
        s.program ? madeAndRead(s.runs, s.reads) : perRun(runsOf(producer.id), s.runs);
    return s;
  }

  void decideSync(const Record& r, const formats::Op& producer, Candidate& c) const {
    const rules::SyncSite s = syncFacts(r, producer);
    for (const auto& rule : rules::syncRules()) {
      auto v = rule.check(s);
      if (!v)
        continue;
      Decision d = base(r, producer);
      d.action = v->action;
      d.reason = std::move(v->reason);
      c.rule = rule.name;
      c.veto = v->veto;
      if (v->carries != rules::Carries::Nothing) {
        d.consumers = v->carries == rules::Carries::Gaining ? s.gaining : s.candidates;
        d.predicted_cost_ms = s.cost;
        d.predicted_saving_ms = s.saving;
        c.saving = s.saving;
        c.cost = s.cost;
        c.conversions = s.runs;
        c.margin = s.margin;
        c.through = s.through;
        // Hidden in an idle window, the conversion costs the critical path only the hand-off.
        // Idle windows are moments of one run; a value made in a loop is made at many.
        c.can_async = v->async_allowed && !s.constant && !r.in_loop && !s.gaining.empty() &&
                      !s.fused_template && s.saving - o_.async_overhead_ms * s.runs > s.margin;
        if (d.action == Action::Sync && s.fused_template &&
            d.consumers.size() == r.consumers.size()) {
          d.fused_template_input = s.fused_template;
          d.reason += "; fused into its producer (" + r.producer_fusion->op + " writes it " +
                      "row-major itself, measured " + fmtMs(s.fusion_saving) +
                      " faster than converting after it)";
        }
      }
      c.decision = std::move(d);
      return;
    }
    XALLOC_EXPECTS(false, "the last sync rule decides every site");
  }

  // The facts the remove rules read: the conversion's input and what its consumers take
  // without it.
  rules::RemoveSite removeFacts(const Record& r, const formats::Op& conv) const {
    const Record* src = conv.inputs.empty() ? nullptr : p_.findRecord(conv.inputs.front());
    rules::RemoveSite s(r, conv, src, p_);
    s.exact = o_.tolerance <= 0;
    if (!src)
      return s;
    for (const auto& c : r.consumers) {
      const formats::Op* op = p_.findOp(c.op_id);
      if (s.needs_contiguous_anyway.empty() &&
          (!c.accepts_noncontiguous || (op && op->kind == "aten::view")))
        s.needs_contiguous_anyway = s.ops.kind(c.op_id);
    }
    double var = sq(se(conv.duration_spread_ms));
    double served_ms = 0;
    for (const auto& c : r.consumers) {
      if (s.ops.readsOnlySizes(c.op_id))
        continue;
      const rules::Blocker b = !c.accepts_noncontiguous ? rules::Blocker::NeedsContiguous
                               : !c.measured || !c.time_noncontiguous_ms
                                   ? rules::Blocker::Unmeasured
                               : !withinTolerance(c, o_.tolerance) ? rules::Blocker::OtherBits
                               : !c.same_output_layout             ? rules::Blocker::OtherLayout
                                                                   : rules::Blocker::None;
      if (b != rules::Blocker::None) {
        s.blocker = b;
        s.blocker_op = s.ops.kind(c.op_id);
        return s;
      }
      const auto [delta, delta_var] =
          layoutChange(c, *c.time_noncontiguous_ms, c.time_noncontiguous_spread_ms);
      const double k = readsOf(r, c, conv.id);
      s.extra += delta * k;
      var += delta_var * k * k;
      served_ms += c.time_as_is_ms * k;
    }
    s.margin = marginFor(var, served_ms + conv.duration_ms);
    s.margin_is_floor = !(s.margin > floor_ms_);
    return s;
  }

  void decideRemove(const Record& r, const formats::Op& conv, Candidate& c) const {
    const rules::RemoveSite s = removeFacts(r, conv);
    for (const auto& rule : rules::removeRules()) {
      auto v = rule.check(s);
      if (!v)
        continue;
      Decision d = base(r, conv);
      for (const auto& consumer : r.consumers)
        d.consumers.push_back(consumer.op_id);
      d.predicted_cost_ms = conv.duration_ms;
      if (s.input && s.input->producer_op)
        d.input_anchor = p_.findOp(*s.input->producer_op)->anchor;
      d.action = v->action;
      d.reason = std::move(v->reason);
      c.rule = rule.name;
      c.veto = v->veto;
      if (v->carries == rules::Carries::Call) {
        c.saving = conv.duration_ms;
      } else if (v->carries == rules::Carries::Measured) {
        d.predicted_saving_ms = s.extra;
        c.saving = conv.duration_ms;
        c.cost = s.extra;
        c.margin = s.margin;
      }
      c.decision = std::move(d);
      if (c.decision.action != Action::Remove)
        fuseExisting(r, conv, s, c);
      return;
    }
    XALLOC_EXPECTS(false, "the last remove rule decides every site");
  }

  // An existing row-major conversion kept, whose input only it reads and a pointwise producer
  // makes: when the producer writing row-major itself (ProducerFusion) was measured faster than
  // the producer and this conversion, by more than the noise and within the tolerance, the
  // conversion goes and the producer writes what its readers read. Their input keeps its layout
  // and (within the tolerance) its values, so nothing they do changes.
  void fuseExisting(const Record& r, const formats::Op& conv, const rules::RemoveSite& s,
                    Candidate& c) const {
    const Record* in = s.input;
    if (!in || !in->producer_fusion || in->has_writers || r.has_writers || !r.contiguous ||
        in->consumers.size() != 1 || in->consumers.front().op_id != conv.id ||
        p_.model.format == formats::ModelFormat::LibtorchProgram || !in->producer_op)
      return;
    const formats::ProducerFusion& f = *in->producer_fusion;
    const double runs = weightedRuns(*in, *in->producer_op, *in->producer_op);
    const double gain = -f.delta_ms * runs;
    const double margin = std::max(floor_ms_, o_.z * se(f.delta_spread_ms) * runs);
    if (!withinTolerance(f.identical_output, f.output_error, o_.tolerance) || !(gain > margin))
      return;
    Decision& d = c.decision;
    d.action = Action::Remove;
    d.fused_template_input = f.template_input;
    // As a removal's: the time the conversion took goes (here, what the fusion saves), and the
    // consumers take no longer.
    d.predicted_cost_ms = gain;
    d.predicted_saving_ms = 0;
    d.reason = "fused into its producer: " + f.op + " writes " + in->name +
               " row-major itself, measured " + fmtMs(gain) +
               " faster than it and this conversion, which goes (" + d.reason + ")";
    c.rule = "fuse-existing";
    c.veto = false;
    c.saving = gain;
    c.cost = 0;
    c.margin = margin;
  }

  const Profile& p_;
  costfit::CostPredictor predictor_;
  SchedOptions o_;
  double floor_ms_;
};

} // namespace

std::vector<SiteVerdict> siteVerdicts(const Profile& p, const formats::Cost& cost,
                                      const SchedOptions& o) {
  std::vector<SiteVerdict> out;
  for (const Candidate& c : Decider(p, cost, o).decideAll())
    out.push_back({c.decision.value_id, c.decision.action, c.veto, c.rule});
  return out;
}

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
  const auto groups = editGroups(p, cands);
  for (const auto& group : groups)
    reconcile(cands, group);
  resolveOverlaps(p, cands, groups);

  auto& m = s.summary;
  for (const auto& op : p.ops)
    m.predicted_time_before_ms += op.duration_ms;
  m.peak_bytes_before = predictedPeakBytes(p, {});
  m.memory_budget_bytes = o.memory_budget_bytes;
  m.window_safety = o.window_safety;
  m.form = o.form;
  m.tolerance = o.tolerance;
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
    if (d.action != Action::Sync && d.action != Action::Remove)
      d.fused_template_input.reset(); // only a conversion made (or kept) right after its producer
    s.decisions.push_back(std::move(d));
  }
  // Layout regions (the model frozen): each runs in its fastest measured layout. A value
  // decision about an op of a region that changes layout is the region's to make.
  double region_gain = 0, dropped_gain = 0;
  const auto regions = decideRegions(p, o, gainFloor(p, o));
  for (auto& d : s.decisions) {
    std::int64_t region = 0;
    if (d.action != Action::None && insideChosenRegion(d, p, regions, &region)) {
      dropped_gain += d.predicted_saving_ms - d.predicted_cost_ms;
      d.action = Action::None;
      d.window_id.reset();
      d.fused_template_input.reset();
      d.reason = "inside layout region " + std::to_string(region) +
                 ", which runs in another layout as a whole";
    }
  }
  for (const auto& r : regions) {
    region_gain += r.gain;
    s.decisions.push_back(r.decision);
  }
  m.predicted_time_after_ms =
      m.predicted_time_before_ms - sol.gain + std::max(0.0, dropped_gain) - region_gain;
  m.predicted_time_bound_ms = m.predicted_time_before_ms - sol.bound;
  m.peak_bytes_after = predictedPeakBytes(p, s.decisions);
  XALLOC_EXPECTS(!o.memory_budget_bytes || m.peak_bytes_after <= *o.memory_budget_bytes,
                 "the plan's peak " + std::to_string(m.peak_bytes_after) +
                     " stays within the budget the solver enforced");
  return s;
}

} // namespace xalloc::scheduler
