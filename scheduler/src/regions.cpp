// Region decisions: each layout region runs in the candidate layout that xprof measured fastest,
// boundary conversions included, among those within the tolerance, the form and the noise. A
// region's candidates are timed with their own entry and exit conversions and regions share no
// op, so the plan's time is the sum of the regions' and choosing each region's best is the best
// combination: exact, no search needed. With profiles at other input shapes (xsched
// --shape-profile), a layout must hold at each: never slower beyond the noise, faster at one,
// and the best by the geometric mean over the shapes.
#include "regions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "candidates.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::RegionCandidate;

namespace {

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * x);
  return buf;
}

// The profile's op for a region's first op (the unfrozen graph numbers it), if it has one.
const formats::Op* profileOpFor(const formats::Profile& p, const formats::Anchor& a) {
  for (const auto& op : p.ops)
    if (op.anchor.sameSite(a))
      return &op;
  return nullptr;
}

bool sameRef(const formats::RegionRef& a, const formats::RegionRef& b) {
  if (a.nodes.size() != b.nodes.size() || a.convolutions != b.convolutions)
    return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i)
    if (a.nodes[i].op != b.nodes[i].op || !a.nodes[i].sameSite(b.nodes[i]))
      return false;
  return true;
}

// What a region's layout may move its outputs by: the tolerance, or where one ulp of the
// region's inputs moves them more (an ill-conditioned stack of layers: SSD's deepest feature
// maps), formats::noiseBound of that: such a change is float32 rounding's own. --exact stays
// exact.
double regionBound(const formats::Region& g, const SchedOptions& o) {
  return o.within_noise ? formats::noiseBound(o.tolerance, g.rounding_error) : o.tolerance;
}

// A candidate measured at one shape: its gain over the region as it is, and the noise margin.
struct Measured {
  std::string why; // why it may not be chosen at this shape ("" when it may)
  double as_is_ms = 0, gain = 0, margin = 0;
};

Measured measure(const formats::Region& g, const RegionCandidate& c, std::int64_t repeats,
                 const SchedOptions& o, double floor_ms) {
  Measured m;
  const RegionCandidate& as_is = g.candidates.front();
  m.as_is_ms = as_is.time_ms;
  m.gain = c.delta_ms ? -*c.delta_ms : as_is.time_ms - c.time_ms;
  const double se = medianStandardError(c.delta_spread_ms.value_or(c.spread_ms),
                                        std::max<std::int64_t>(repeats, 5));
  m.margin = std::max({floor_ms, o.z * se, o.min_region_gain * as_is.time_ms});
  if (!withinTolerance(c.identical_output, c.output_error, regionBound(g, o))) {
    if (o.tolerance > 0 && c.output_error) {
      m.why = "moves the outputs by " + fmtSci(*c.output_error) + " of their scale, beyond the " +
              "tolerance " + fmtSci(o.tolerance);
      if (g.rounding_error && o.within_noise)
        m.why += " and beyond twice what one ulp of its inputs moves them (" +
                 fmtSci(*g.rounding_error) + ")";
      if (std::isfinite(*c.output_error) && *c.output_error <= formats::kMaxTolerance)
        m.why += "; --tolerance " + fmtSci(*c.output_error * 1.05) + " would let it in";
    } else {
      m.why = "changes the outputs' bits (--exact)";
    }
  }
  return m;
}

// The same candidate at another shape: the region with the same ops in `q`, the candidate of
// the same layout in it.
const RegionCandidate* atShape(const formats::Profile& q, const formats::Region& g,
                               const RegionCandidate& c, const formats::Region** region) {
  for (const auto& h : q.regions)
    if (sameRef(h.ref, g.ref)) {
      *region = &h;
      if (!h.note.empty() || !h.candidates.front().measured)
        return nullptr;
      for (const auto& hc : h.candidates)
        if (hc.layout == c.layout && hc.measured)
          return &hc;
      return nullptr;
    }
  *region = nullptr;
  return nullptr;
}

} // namespace

std::string inputShapes(const formats::Profile& p) {
  std::string s;
  for (const auto& in : p.settings.inputs) {
    if (in.shape.empty())
      return "";
    s += s.empty() ? "" : ",";
    for (std::size_t i = 0; i < in.shape.size(); ++i)
      s += (i ? "x" : "") + std::to_string(in.shape[i]);
  }
  return s;
}

std::string fmtSci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", x);
  return buf;
}

std::vector<RegionVerdict> decideRegions(const formats::Profile& p, const SchedOptions& o,
                                         double floor_ms) {
  std::vector<RegionVerdict> out;
  // The input shapes of the profile, then of each profile at another shape.
  std::vector<std::string> labels{inputShapes(p)};
  if (o.other_shapes)
    for (const formats::Profile& q : *o.other_shapes)
      labels.push_back(inputShapes(q));
  for (const auto& g : p.regions) {
    RegionVerdict v;
    Decision& d = v.decision;
    d.action = Action::None;
    d.setRegion(g.ref, g.candidates.front().traits());
    d.anchor = g.ref.nodes.front();
    if (const formats::Op* op = profileOpFor(p, d.anchor)) {
      d.producer = op->id;
      if (!op->outputs.empty())
        d.value_id = op->outputs.front();
    }
    if (!g.entries.empty())
      d.layout = g.entries.front();
    const RegionCandidate& as_is = g.candidates.front();
    const bool linear = g.ref.convolutions == 0 && g.ref.nodes.front().op == "aten::linear";
    const std::string what =
        linear ? "a linear" + std::string(g.ref.nodes.size() > 1 ? " and its activation" : "")
               : std::to_string(g.ref.nodes.size()) + " ops, " +
                     std::to_string(g.ref.convolutions) + " convolution(s)";
    if (!p.model.frozen.value_or(false)) {
      // The regions were measured on the model frozen; this plan is for the model as profiled,
      // whose weights are attributes that a rewrite cannot re-lay once.
      d.reason = "region " + std::to_string(g.ref.id) + " (" + what +
                 ") left as it is: the model was profiled unfrozen (profile it with xprof "
                 "--freeze, and rewrite with xrewrite --freeze, to re-lay its weights once)";
      out.push_back(std::move(v));
      continue;
    }
    if (!g.note.empty() || !as_is.measured) {
      d.reason = "region " + std::to_string(g.ref.id) + " (" + what + ") not measured" +
                 (g.note.empty() ? "" : ": " + g.note);
      out.push_back(std::move(v));
      continue;
    }
    // The best candidate that may be chosen, and the best that may not with why.
    const RegionCandidate* best = nullptr;
    double best_gain = 0, best_margin = 0, best_score = 0;
    std::string blocked_why, best_shapes;
    double blocked_gain = 0;
    const bool shapes = o.other_shapes && !o.other_shapes->empty();
    for (std::size_t i = 1; i < g.candidates.size(); ++i) {
      const RegionCandidate& c = g.candidates[i];
      if (!c.measured)
        continue;
      const Measured m = measure(g, c, p.settings.repeats, o, floor_ms);
      const double gain = m.gain, margin = m.margin;
      std::string why = m.why;
      if (why.empty() && c.needsRuntime() && o.form != formats::RewriteForm::Fast)
        why = "needs the runtime's ops (xsched --form fast)";
      // Over a set of shapes: not slower beyond the noise at any, faster beyond it at one, the
      // best by the geometric mean of its time over the region's as it is. One shape: faster
      // beyond the noise, the best by the time saved.
      double score = gain;
      std::string per_shape;
      if (why.empty() && shapes) {
        bool faster = false;
        double log_ratio = 0;
        auto consider = [&](const std::string& at, const Measured& mk) {
          if (!mk.why.empty())
            why = mk.why + " at " + at;
          else if (mk.gain < -mk.margin)
            why = "is slower at " + at + " by " + fmtMs(-mk.gain);
          faster = faster || mk.gain > mk.margin;
          log_ratio += std::log((mk.as_is_ms - mk.gain) / mk.as_is_ms);
          per_shape += (per_shape.empty() ? "" : ", ") + at + " " + fmtMs(mk.as_is_ms) + " -> " +
                       fmtMs(mk.as_is_ms - mk.gain);
        };
        consider(labels.front(), m);
        for (std::size_t k = 0; k < o.other_shapes->size() && why.empty(); ++k) {
          const formats::Profile& q = (*o.other_shapes)[k];
          const formats::Region* h = nullptr;
          const RegionCandidate* hc = atShape(q, g, c, &h);
          if (!hc) {
            why = (h ? "was not measured at " : "is not a region at ") + labels[k + 1];
            break;
          }
          consider(labels[k + 1], measure(*h, *hc, q.settings.repeats, o, floor_ms));
        }
        if (why.empty() && !faster)
          why = "is faster beyond the noise at none of the shapes";
        score = -log_ratio / static_cast<double>(1 + o.other_shapes->size());
      } else if (why.empty() && !(gain > margin)) {
        why = "saves " + fmtMs(gain) + ", within the noise margin " + fmtMs(margin);
      }
      if (why.empty()) {
        if (!best || score > best_score) {
          best = &c;
          best_gain = gain;
          best_margin = margin;
          best_score = score;
          best_shapes = per_shape;
        }
      } else if (gain > blocked_gain) {
        blocked_gain = gain;
        blocked_why = c.name() + " " + why;
      }
    }
    d.predicted_saving_ms = best ? best_gain : 0;
    if (best) {
      d.action = Action::Sync;
      d.setRegion(g.ref, best->traits());
      if (shapes) {
        d.holds_for = labels;
        d.reason = "region " + std::to_string(g.ref.id) + " (" + what + ") runs as ";
        d.reason += best->name() + " at every shape profiled: " + best_shapes;
        d.reason += " measured with its " + std::to_string(g.entries.size()) + " entry and " +
                    std::to_string(g.exits.size()) + " exit conversion(s) (";
        d.reason += pct(1 - std::exp(-best_score)) + " faster, geometric mean)";
      } else {
        d.reason = "region " + std::to_string(g.ref.id) + " (" + what + ") runs as " +
                   best->name() + ": " + fmtMs(as_is.time_ms) + " -> " +
                   fmtMs(as_is.time_ms - best_gain) + " measured with its " +
                   std::to_string(g.entries.size()) + " entry and " +
                   std::to_string(g.exits.size()) + " exit conversion(s) (" +
                   pct(best_gain / as_is.time_ms) + " faster, margin " + fmtMs(best_margin) + ")";
      }
      if (!best->identical_output && best->output_error) {
        d.reason += "; outputs within " + fmtSci(*best->output_error) + " of their scale";
        if (*best->output_error > o.tolerance && g.rounding_error && o.within_noise)
          d.reason += ", within twice what one ulp of its inputs moves them (" +
                      fmtSci(*g.rounding_error) + "): float32 rounding's own effect";
      }
      v.gain = best_gain;
    } else {
      d.reason = "region " + std::to_string(g.ref.id) + " (" + what + ") left as it is" +
                 (blocked_why.empty() ? ": no layout measured faster" : ": " + blocked_why);
    }
    out.push_back(std::move(v));
  }
  return out;
}

ChosenRegions::ChosenRegions(const std::vector<RegionVerdict>& regions) {
  for (const auto& r : regions)
    if (r.decision.action == Action::Sync && r.decision.region)
      for (const auto& n : r.decision.region->nodes)
        by_site_.emplace(std::make_tuple(n.file, n.function, n.expr, n.ordinal),
                         r.decision.region->id);
}

std::optional<std::int64_t> ChosenRegions::regionOf(const formats::Decision& value_decision,
                                                    const formats::Profile& p) const {
  if (by_site_.empty())
    return std::nullopt;
  auto find = [&](std::int64_t op_id) -> std::optional<std::int64_t> {
    const formats::Op* op = p.findOp(op_id);
    if (!op)
      return std::nullopt;
    const auto& a = op->anchor;
    auto it = by_site_.find(std::make_tuple(a.file, a.function, a.expr, a.ordinal));
    return it == by_site_.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
  };
  if (auto r = find(value_decision.producer))
    return r;
  for (auto id : value_decision.consumers)
    if (auto r = find(id))
      return r;
  return std::nullopt;
}

} // namespace xalloc::scheduler
