// Region decisions: each layout region runs in the candidate layout that xprof measured fastest,
// boundary conversions included, among those within the tolerance, the form and the noise. A
// region's candidates are timed with their own entry and exit conversions and regions share no
// op, so the plan's time is the sum of the regions' but for one thing: where two regions next to
// each other (the profile's feeds) run in one channels-last layout, the rewrite writes neither
// conversion at their border, and both measurements counted one. So the choice is made with the
// neighbours' (chooseWithNeighbours): a region within the noise on its own joins neighbours that
// run in its layout when what their border saves, priced by the cost model, lifts it beyond the
// margin; otherwise each region's best stands. With profiles at other input shapes (xsched
// --shape-profile), a layout must hold at each: never slower beyond the noise, faster at one,
// and the best by the geometric mean over the shapes (each region alone).
#include "regions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "candidates.h"
#include "wording.h"
#include "xalloc/costfit/cost_model.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::RegionCandidate;

namespace {

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

// Why a layout may not be chosen for a region, as data: the blocker (None when it may be) and
// the numbers behind it; wording.cpp says it.
struct Ineligible {
  formats::Blocker blocker = formats::Blocker::None;
  formats::NamedValues values;
  bool ok() const { return blocker == formats::Blocker::None; }
  void set(formats::Blocker b, formats::NamedValues v = {}) {
    blocker = b;
    values = std::move(v);
  }
};

// A candidate measured at one shape: its gain over the region as it is, and the noise margin.
struct Measured {
  Ineligible why; // why it may not be chosen at this shape
  double as_is_ms = 0, gain = 0, margin = 0;
  /// When the sign test set the margin: faster in this many of that many paired rounds.
  std::int64_t faster_rounds = 0, rounds = 0;
};

// One-sided sign test: the chance of `k` or more of `n` fair coin flips coming up heads.
double signTestP(std::int64_t k, std::int64_t n) {
  double p = 0;
  for (std::int64_t i = k; i <= n; ++i)
    p += std::exp(
        std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
        std::lgamma(static_cast<double>(n - i) + 1) - static_cast<double>(n) * std::log(2.0));
  return p;
}
constexpr double kSignTestP = 0.01;

Measured measure(const formats::Region& g, const RegionCandidate& c, std::int64_t repeats,
                 const SchedOptions& o, double floor_ms) {
  Measured m;
  const RegionCandidate& as_is = g.candidates.front();
  m.as_is_ms = as_is.time_ms;
  m.gain = c.delta_ms ? -*c.delta_ms : as_is.time_ms - c.time_ms;
  const double se = medianStandardError(c.delta_spread_ms.value_or(c.spread_ms),
                                        std::max<std::int64_t>(repeats, 5));
  m.margin = std::max({floor_ms, o.z * se, o.min_region_gain * as_is.time_ms});
  // Faster in nearly every paired round, though outliers of either side (a quarter of the
  // rounds of ATen's ops at two threads on a shared machine take ten times their median) widen
  // the spread: the sign test, which no outlier sways, stands for the spread's part.
  if (c.rounds && c.faster_rounds && m.gain > 0 &&
      signTestP(*c.faster_rounds, *c.rounds) < kSignTestP) {
    const double floor = std::max(floor_ms, o.min_region_gain * as_is.time_ms);
    if (floor < m.margin) {
      m.margin = floor;
      m.faster_rounds = *c.faster_rounds;
      m.rounds = *c.rounds;
    }
  }
  if (!withinTolerance(c.identical_output, c.output_error, regionBound(g, o))) {
    formats::NamedValues v;
    if (o.tolerance > 0 && c.output_error) {
      v = {{"output_error", *c.output_error}, {"tolerance", o.tolerance}};
      if (g.rounding_error && o.within_noise)
        v.push_back({"rounding_error", *g.rounding_error});
      if (std::isfinite(*c.output_error) && *c.output_error <= formats::kMaxTolerance)
        v.push_back({"tolerance_needed", *c.output_error * 1.05});
    } else {
      v = {{"exact", 1.0}};
    }
    m.why.set(formats::Blocker::OutputBits, std::move(v));
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

namespace {

// A candidate that may be chosen but for the noise: its measured gain and margin, and, once the
// neighbours are known, the conversions at its borders that it and they no longer make.
struct RegionOption {
  const RegionCandidate* c = nullptr;
  double gain = 0, margin = 0, score = 0;
  bool clear = false; // faster beyond the noise on its own
  /// At each shape profiled (--shape-profile): the region's time as it is and in this layout.
  struct AtShape {
    std::string shape;
    double as_is_ms, after_ms;
  };
  std::vector<AtShape> per_shape;
  double own_border_ms = 0; // this region's own border conversions saved (its measurement's)
  std::vector<std::int64_t> shared_with;
  std::int64_t faster_rounds = 0, rounds = 0; // Measured's
};

// One region's options and what blocked the others.
struct Options {
  std::vector<RegionOption> options;
  /// The layout that would gain most of those that may not be chosen, and why not.
  std::string blocked_layout;
  Ineligible blocked_why;
  double blocked_gain = 0;
  int chosen = -1; // index into options; -1: as it is
};

// Whether the plan must hold at several input shapes (xsched --shape-profile).
bool overShapes(const SchedOptions& o) {
  return o.other_shapes && !o.other_shapes->empty();
}

bool sharesBorders(formats::LayoutTarget t) {
  return t == formats::LayoutTarget::ChannelsLast || t == formats::LayoutTarget::ChannelsLast3d;
}

// A region's neighbour across one feed (an exit of one read by the other), and the tensor that
// crosses: what a conversion at that border would convert.
struct Border {
  std::size_t other;
  const formats::Layout* value;
};

// Neighbour-aware choice: a region whose neighbours run in its candidate's channels-last layout
// saves their border conversions as well as its own (theirs were counted in their measurement,
// its own in its), so a candidate within the noise on its own is chosen when, with the
// conversions a shared border no longer writes (predicted by the cost model), it saves more
// than the margin; and of two candidates, the one the neighbours share wins by what it saves
// there. Repeated until no choice changes (a few rounds: a chain settles in one).
void chooseWithNeighbours(const formats::Profile& p, const costfit::CostPredictor& predictor,
                          std::vector<Options>& regions) {
  std::map<std::int64_t, std::size_t> by_id;
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    by_id[p.regions[i].ref.id] = i;
  std::vector<std::vector<Border>> borders(p.regions.size());
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    for (const auto& f : p.regions[i].feeds) {
      auto j = by_id.find(f.region);
      if (j == by_id.end() || j->second == i ||
          f.exit >= static_cast<std::int64_t>(p.regions[i].exits.size()))
        continue;
      const formats::Layout* v = &p.regions[i].exits[static_cast<std::size_t>(f.exit)];
      borders[i].push_back({j->second, v});
      borders[j->second].push_back({i, v});
    }
  auto targetOf = [&](std::size_t i) {
    const Options& r = regions[i];
    return r.chosen < 0 ? formats::LayoutTarget::Contiguous
                        : r.options[static_cast<std::size_t>(r.chosen)].c->target();
  };
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (std::size_t i = 0; i < regions.size(); ++i) {
      Options& r = regions[i];
      int pick = -1;
      double pick_total = 0;
      for (std::size_t k = 0; k < r.options.size(); ++k) {
        RegionOption& o = r.options[k];
        o.own_border_ms = 0;
        o.shared_with.clear();
        if (sharesBorders(o.c->target()))
          for (const Border& b : borders[i])
            if (targetOf(b.other) == o.c->target())
              if (auto pred = predictor.predict(*b.value, o.c->target())) {
                o.own_border_ms += pred->ms;
                o.shared_with.push_back(p.regions[b.other].ref.id);
              }
        const double total = o.gain + 2 * o.own_border_ms;
        if (total > o.margin && (pick < 0 || total > pick_total)) {
          pick = static_cast<int>(k);
          pick_total = total;
        }
      }
      if (pick != r.chosen) {
        r.chosen = pick;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
}

// "3,4,5": the ids, sorted, each once.
std::string regionList(std::vector<std::int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i)
    s += (i == 0 ? "" : ",") + std::to_string(ids[i]);
  return s;
}

// Each region's options: the candidates that may be chosen, or may but for the noise; the one
// chosen on its own (before the neighbours are known).
std::vector<Options> regionOptions(const formats::Profile& p, const SchedOptions& o,
                                   double floor_ms, const std::vector<std::string>& labels) {
  const bool shapes = overShapes(o);
  std::vector<Options> all(p.regions.size());
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const formats::Region& g = p.regions[r];
    Options& opts = all[r];
    if (!p.model.frozen.value_or(false) || !g.note.empty() || !g.candidates.front().measured)
      continue;
    for (std::size_t i = 1; i < g.candidates.size(); ++i) {
      const RegionCandidate& c = g.candidates[i];
      if (!c.measured)
        continue;
      const Measured m = measure(g, c, p.settings.repeats, o, floor_ms);
      const double gain = m.gain, margin = m.margin;
      Ineligible why = m.why;
      if (why.ok() && c.needsRuntime() && o.form != formats::RewriteForm::Fast)
        why.set(formats::Blocker::NeedsRuntime);
      // Over a set of shapes: not slower beyond the noise at any, faster beyond it at one, the
      // best by the geometric mean of its time over the region's as it is. One shape: faster
      // beyond the noise, the best by the time saved (or, but for the noise, with what its
      // neighbours save: chooseWithNeighbours).
      double score = gain;
      std::vector<RegionOption::AtShape> per_shape;
      bool near = false;
      if (why.ok() && shapes) {
        bool faster = false;
        double log_ratio = 0;
        auto consider = [&](const std::string& at, const Measured& mk) {
          if (!mk.why.ok()) {
            why = mk.why;
            why.values.push_back({"at", at});
          } else if (mk.gain < -mk.margin) {
            why.set(formats::Blocker::OtherShape, {{"at", at}, {"slower_ms", -mk.gain}});
          }
          faster = faster || mk.gain > mk.margin;
          log_ratio += std::log((mk.as_is_ms - mk.gain) / mk.as_is_ms);
          per_shape.push_back({at, mk.as_is_ms, mk.as_is_ms - mk.gain});
        };
        consider(labels.front(), m);
        for (std::size_t k = 0; k < o.other_shapes->size() && why.ok(); ++k) {
          const formats::Profile& q = (*o.other_shapes)[k];
          const formats::Region* h = nullptr;
          const RegionCandidate* hc = atShape(q, g, c, &h);
          if (!hc) {
            why.set(h ? formats::Blocker::Unmeasured : formats::Blocker::OtherShape,
                    {{"at", labels[k + 1]}});
            break;
          }
          consider(labels[k + 1], measure(*h, *hc, q.settings.repeats, o, floor_ms));
        }
        if (why.ok() && !faster)
          why.set(formats::Blocker::BelowMargin);
        score = -log_ratio / static_cast<double>(1 + o.other_shapes->size());
      } else if (why.ok() && !(gain > margin)) {
        why.set(formats::Blocker::BelowMargin, {{"gain_ms", gain}, {"margin_ms", margin}});
        near = true;
      }
      if (why.ok() || near)
        opts.options.push_back(
            {&c, gain, margin, score, why.ok(), per_shape, 0, {}, m.faster_rounds, m.rounds});
      if (why.ok()) {
        if (opts.chosen < 0 || score > opts.options[static_cast<std::size_t>(opts.chosen)].score)
          opts.chosen = static_cast<int>(opts.options.size() - 1);
      } else if (gain > opts.blocked_gain) {
        opts.blocked_gain = gain;
        opts.blocked_layout = c.name();
        opts.blocked_why = why;
      }
    }
  }
  return all;
}

// The decision for region `g` of `p` and its reason, from its options.
RegionVerdict verdictOf(const formats::Profile& p, const formats::Region& g, const Options& opts,
                        const SchedOptions& o, const std::vector<std::string>& labels) {
  const bool shapes = overShapes(o);
  RegionVerdict v;
  Decision& d = v.decision;
  d.action = Action::None;
  d.rule = "region";
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
  // The region, for its head: "region 3 (12 ops, 4 convolution(s))", "region 5 (a linear)".
  d.values = {
      {"region", static_cast<double>(g.ref.id)},
      {"ops", static_cast<double>(g.ref.nodes.size())},
      {"convolutions", static_cast<double>(g.ref.convolutions)},
      {"linear", g.ref.convolutions == 0 && g.ref.nodes.front().op == "aten::linear" ? 1.0 : 0.0}};
  auto decided = [&](formats::Blocker b, formats::NamedValues more = {}) {
    d.blocker = b;
    d.values.insert(d.values.end(), more.begin(), more.end());
    d.reason = wording::reason(wording::Site::Region, d);
    return v;
  };
  if (!p.model.frozen.value_or(false))
    // The regions were measured on the model frozen; this plan is for the model as profiled,
    // whose weights are attributes that a rewrite cannot re-lay once.
    return decided(formats::Blocker::Unfrozen);
  if (!g.note.empty() || !as_is.measured)
    return decided(formats::Blocker::Unmeasured, {{"note", g.note}});
  if (opts.chosen < 0) {
    if (opts.blocked_why.ok())
      return decided(formats::Blocker::NothingToGain);
    formats::NamedValues why = opts.blocked_why.values;
    why.insert(why.begin(), {"layout", opts.blocked_layout});
    return decided(opts.blocked_why.blocker, std::move(why));
  }
  const RegionOption& best = opts.options[static_cast<std::size_t>(opts.chosen)];
  d.action = Action::Sync;
  d.setRegion(g.ref, best.c->traits());
  formats::NamedValues chosen{{"layout", best.c->name()},
                              {"entries", static_cast<double>(g.entries.size())},
                              {"exits", static_cast<double>(g.exits.size())}};
  if (shapes) {
    d.holds_for = labels;
    chosen.push_back({"shapes", static_cast<double>(best.per_shape.size())});
    for (std::size_t k = 0; k < best.per_shape.size(); ++k) {
      const std::string i = std::to_string(k);
      chosen.push_back({"shape_" + i, best.per_shape[k].shape});
      chosen.push_back({"as_is_ms_" + i, best.per_shape[k].as_is_ms});
      chosen.push_back({"after_ms_" + i, best.per_shape[k].after_ms});
    }
    chosen.push_back({"speedup", 1 - std::exp(-best.score)});
  } else {
    chosen.push_back({"as_is_ms", as_is.time_ms});
    chosen.push_back({"after_ms", as_is.time_ms - best.gain});
    chosen.push_back({"gain_ms", best.gain});
    chosen.push_back({"margin_ms", best.margin});
    if (best.rounds) {
      chosen.push_back({"faster_rounds", static_cast<double>(best.faster_rounds)});
      chosen.push_back({"rounds", static_cast<double>(best.rounds)});
    }
    if (!best.shared_with.empty()) {
      chosen.push_back({"shared_with", regionList(best.shared_with)});
      chosen.push_back({"clear", best.clear ? 1.0 : 0.0});
      chosen.push_back({"border_ms", 2 * best.own_border_ms});
    }
  }
  if (!best.c->identical_output && best.c->output_error) {
    chosen.push_back({"output_error", *best.c->output_error});
    if (*best.c->output_error > o.tolerance && g.rounding_error && o.within_noise)
      chosen.push_back({"rounding_error", *g.rounding_error});
  }
  decided(formats::Blocker::None, std::move(chosen));
  // Its own border conversions are its to count (its neighbours count theirs).
  v.gain = best.gain + best.own_border_ms;
  d.predicted_saving_ms = v.gain;
  return v;
}

} // namespace

std::vector<RegionVerdict> decideRegions(const formats::Profile& p, const formats::Cost& cost,
                                         const SchedOptions& o, double floor_ms) {
  // The input shapes of the profile, then of each profile at another shape.
  std::vector<std::string> labels{inputShapes(p)};
  if (o.other_shapes)
    for (const formats::Profile& q : *o.other_shapes)
      labels.push_back(inputShapes(q));
  std::vector<Options> all = regionOptions(p, o, floor_ms, labels);
  if (!overShapes(o))
    chooseWithNeighbours(p, costfit::CostPredictor(cost), all);

  std::vector<RegionVerdict> out;
  for (std::size_t r = 0; r < p.regions.size(); ++r)
    out.push_back(verdictOf(p, p.regions[r], all[r], o, labels));
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
