// The facts of one site, measured and priced once (site_facts.h).
#include "site_facts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "xalloc/error.h"

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

double gainFloor(const Profile& p, const SchedOptions& o) {
  double model_ms = 0;
  for (const auto& op : p.ops)
    model_ms += std::max(0.0, op.duration_ms);
  return std::max(o.min_gain_ms, o.min_model_gain * model_ms);
}

double SiteFacts::se(double iqr) const {
  return medianStandardError(iqr, p_.settings.repeats);
}

// A decision must gain more than the noise (z standard errors), than an absolute floor, and
// than a fraction of the time it trades (the consumers' own time and the conversion's): a
// process's timings drift together by several percent from one run to the next, which no
// spread within one run shows, and gains below that do not repeat from run to run.
double SiteFacts::marginFor(double var, double traded_ms) const {
  return std::max({floor_ms_, o_.z * std::sqrt(var), o_.min_relative_gain * traded_ms});
}

// How much longer a consumer takes with the other layout, and the variance of that estimate:
// the paired difference when the profile has it (noise common to each pair cancels), else the
// difference of the two medians.
std::pair<double, double> SiteFacts::layoutChange(const formats::ConsumerTiming& c, double other_ms,
                                                  const std::optional<double>& other_spread) const {
  if (c.delta_ms)
    return {*c.delta_ms, sq(se(c.delta_spread_ms.value_or(0)))};
  return {other_ms - c.time_as_is_ms,
          sq(se(c.time_as_is_spread_ms)) + sq(se(other_spread.value_or(0)))};
}

// Times an op runs in one run of the model (loop trips); savings and costs add up over them.
double SiteFacts::runsOf(std::int64_t op_id) const {
  const formats::Op* op = p_.findOp(op_id);
  return op ? static_cast<double>(op->runs) : 1.0;
}

// How many runs of `op_id` a measurement on `r` stands for. Consumers and conversions in a
// loop are measured on one trip's value, the heaviest; when trips differ in size (a head over
// FPN levels) they add up to the bytes the producer made over all trips, not runs times the
// heaviest (Record::runs_by_bytes).
double SiteFacts::weightedRuns(const Record& r, std::int64_t op_id,
                               std::int64_t producer_id) const {
  const double runs = runsOf(op_id);
  const double producer_runs = runsOf(producer_id);
  if (!r.runs_by_bytes || !(producer_runs > 0))
    return runs;
  return runs * *r.runs_by_bytes / producer_runs;
}

// Times consumer `c` read `r` in one run: a program's profile counts its reads (a weight
// transposed once and read in a loop), a model's consumer reads it each time it runs.
double SiteFacts::readsOf(const Record& r, const formats::ConsumerTiming& c,
                          std::int64_t producer) const {
  return c.reads ? static_cast<double>(*c.reads) : weightedRuns(r, c.op_id, producer);
}

// What a consumer whose output changes layout (`c`, same_output_layout false) leads to: the
// summed change of the consumers of its outputs, each re-run with the output the other layout
// gives (ConsumerTiming::downstream), its variance, and their time as they are. Nothing when
// one of those consumers was not followed, not measured, not within the tolerance, or itself
// changes layout and was not followed further: then what the change does is not known. Each
// is counted once per read of the value by `c` (what `c` makes, they read).
std::optional<SiteFacts::After> SiteFacts::followed(const formats::ConsumerTiming& c) const {
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
      const auto [dd, dv] = layoutChange(*d, *d->time_contiguous_ms, d->time_contiguous_spread_ms);
      if (!d->same_output_layout) {
        const auto further = followed(*d);
        if (!further)
          return std::nullopt;
        a.delta += further->delta;
        a.var += further->var;
        a.as_is_ms += further->as_is_ms;
        a.in_run_ms += further->in_run_ms;
      }
      a.delta += dd;
      a.var += dv;
      a.as_is_ms += d->time_as_is_ms;
      if (const formats::Op* dop = p_.findOp(d->op_id))
        a.in_run_ms += dop->duration_ms;
      ++reached;
    }
  }
  if (reached == 0)
    return std::nullopt;
  return a;
}

// The facts the sync rules read: each consumer classified and weighed, the conversion priced.
rules::SyncSite SiteFacts::syncFacts(const Record& r, const formats::Op& producer) const {
  rules::SyncSite s(r, producer, p_);
  s.exact = o_.tolerance <= 0;
  double var = 0, served_ms = 0; // of the saving, and the consumers' time it trades
  double in_run_ms = 0;          // the gaining consumers' (and those after them) time in the run
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
    double consumer_in_run_ms = op ? op->duration_ms : 0;
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
      consumer_in_run_ms += after->in_run_ms;
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
    in_run_ms += consumer_in_run_ms;
    s.gaining.push_back(c.op_id);
  }
  // No conversion makes its consumers faster than free: a saving measured on isolated re-runs
  // (warm caches, no hooks, another trip count) is capped at what those ops take in the model's
  // run, so a plan never predicts less than nothing (a program's plan had said 626 -> -1168 ms).
  if (in_run_ms > 0 && s.saving > in_run_ms)
    s.saving = in_run_ms;
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
  s.producer_runs = runsOf(producer.id);
  return s;
}

// The facts the remove rules read: the conversion's input and what its consumers take
// without it.
rules::RemoveSite SiteFacts::removeFacts(const Record& r, const formats::Op& conv) const {
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
    using formats::Blocker;
    const Blocker b = !c.accepts_noncontiguous                  ? Blocker::NeedsContiguous
                      : !c.measured || !c.time_noncontiguous_ms ? Blocker::Unmeasured
                      : !withinTolerance(c, o_.tolerance)       ? Blocker::OutputBits
                      : !c.same_output_layout                   ? Blocker::OutputLayout
                                                                : Blocker::None;
    if (b != Blocker::None) {
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

rules::Kept SiteFacts::keptFacts(const rules::RemoveSite& s, const Decision& kept) const {
  rules::Kept k{s, kept};
  const Record* in = s.input;
  const Record& r = s.record;
  k.fusible = in && in->producer_fusion && !in->has_writers && !r.has_writers && r.contiguous &&
              in->consumers.size() == 1 && in->consumers.front().op_id == s.conversion.id &&
              p_.model.format != formats::ModelFormat::LibtorchProgram && in->producer_op;
  if (!k.fusible)
    return k;
  const formats::ProducerFusion& f = *in->producer_fusion;
  const double runs = weightedRuns(*in, *in->producer_op, *in->producer_op);
  k.gain = -f.delta_ms * runs;
  k.margin = std::max(floor_ms_, o_.z * se(f.delta_spread_ms) * runs);
  k.within_tolerance = withinTolerance(f.identical_output, f.output_error, o_.tolerance);
  return k;
}

} // namespace xalloc::scheduler
