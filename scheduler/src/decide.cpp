// makeSchedule: the sites decided alone (decide_sites.cpp), reconciled per edit and against
// overlaps, weighed together by the solver under windows and the memory budget, then the layout
// regions (regions.cpp); the plan's predicted time and peak memory.
#include "xalloc/scheduler/decide.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "xalloc/error.h"
#include "xalloc/scheduler/problem.h"

#include "build_problem.h"
#include "candidates.h"
#include "decide_sites.h"
#include "memory_internal.h"
#include "regions.h"
#include "site_facts.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;

namespace {

// What counting each region timed whole adds to the profile's per-op total: for every region
// whose ops xprof timed as one graph, that time less its ops' per-op times. An op belongs to a
// region when its site (file, function, expression, ordinal) is one of the region's nodes.
double regionsTimedWhole(const Profile& p) {
  using Site = std::tuple<std::string, std::string, std::string, std::int64_t>;
  std::map<Site, std::size_t> region_of;
  std::vector<double> ops_ms(p.regions.size(), 0);
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const formats::Region& g = p.regions[i];
    if (g.candidates.empty() || !g.candidates.front().measured || !g.note.empty())
      continue;
    for (const auto& n : g.ref.nodes)
      region_of.emplace(Site{n.file, n.function, n.expr, n.ordinal}, i);
  }
  for (const auto& op : p.ops) {
    const auto& a = op.anchor;
    if (auto it = region_of.find(Site{a.file, a.function, a.expr, a.ordinal});
        it != region_of.end())
      ops_ms[it->second] += op.duration_ms;
  }
  double delta = 0;
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    if (ops_ms[i] > 0) // its ops were seen: the region replaces them
      delta += p.regions[i].candidates.front().time_ms - ops_ms[i];
  return delta;
}

// Whether the rewrite runs the model's tensors from the runtime's activation arena: it scopes
// them there whenever it applies a region that needs the runtime (xrewrite's
// scopeActivations), and then no op of the model allocates through glibc's malloc.
bool arenaScoped(const std::vector<RegionVerdict>& regions) {
  return std::any_of(regions.begin(), regions.end(), [](const RegionVerdict& r) {
    return r.decision.action == Action::Sync && r.decision.region_layout &&
           r.decision.region_layout->needs_runtime;
  });
}

// A model whose whole run xprof timed (settings.model_run_ms): before is that run. After: a
// rewrite whose tensors come from the arena does not pay the first touches that make up most
// of what the run spends outside its ops, so it is the ops' unit (the interpreter, left out,
// was at most a seventh of a rewritten ShuffleNetV2's time); any other plan keeps what runs
// between the ops, in proportion to the ops it leaves (a plan that changes nothing predicts the
// run unchanged). The bound scales as after does.
void predictWholeRun(double run_ms, bool arena, formats::ScheduleSummary& m) {
  const double ops_before = m.predicted_time_before_ms;
  const double scale = ops_before > 0 ? run_ms / ops_before : 1.0;
  m.whole_run = true;
  m.predicted_time_before_ms = run_ms;
  if (!arena) {
    m.predicted_time_after_ms = std::max(0.0, m.predicted_time_after_ms * scale);
    m.predicted_time_bound_ms = std::max(0.0, m.predicted_time_bound_ms * scale);
  }
}

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
  std::vector<Candidate> cands = decideSites(p, cost, o);
  const auto groups = editGroups(p, cands);
  for (const auto& group : groups)
    reconcile(cands, group);
  resolveOverlaps(p, cands, groups);

  auto& m = s.summary;
  // A program's run, as xprof measured it without its own work, is what the plan changes: its
  // calls inside libtorch (backward passes, optimizer steps) run as before. Else the ops' sum.
  m.whole_run =
      p.model.format == formats::ModelFormat::LibtorchProgram && p.settings.program_run_ms > 0;
  if (m.whole_run)
    m.predicted_time_before_ms = p.settings.program_run_ms;
  else
    for (const auto& op : p.ops)
      m.predicted_time_before_ms += op.duration_ms;
  const Storages storages = storagesOf(p); // computed once, for every peak below
  m.peak_bytes_before = predictedPeakBytes(p, storages, {});
  m.memory_budget_bytes = o.memory_budget_bytes;
  m.window_safety = o.window_safety;
  m.form = o.form;
  m.tolerance = o.tolerance;
  if (o.memory_budget_bytes && *o.memory_budget_bytes < m.peak_bytes_before) {
    const std::int64_t least = smallestFeasiblePeak(p, storages, cands, groups);
    if (*o.memory_budget_bytes < least)
      throw InputError("xsched", "memory budget " + std::to_string(*o.memory_budget_bytes) +
                                     " bytes is impossible: the smallest feasible budget is " +
                                     std::to_string(least) + " bytes (the model's own peak is " +
                                     std::to_string(m.peak_bytes_before) + " bytes)");
  }

  Built built = buildProblem(p, storages, cands, groups, o);
  Solution sol = solve(built.problem, o.limits);
  m.solver = sol.method;
  m.optimal = sol.optimal;
  m.gap = sol.gap();
  m.nodes = sol.nodes;

  // The per-site rules first decided alone; the solver's choice now overrides them.
  for (std::size_t i = 0; i < cands.size(); ++i) {
    Decision d = cands[i].decision;
    d.rule = cands[i].rule;
    const std::size_t site = built.site_of[i];
    const Option& chosen =
        built.problem.sites[site].options[static_cast<std::size_t>(sol.choice[site])];
    const auto action = static_cast<Action>(chosen.kind);
    if (action == Action::Async) {
      const auto* w = findWindow(p, built.window_ids[static_cast<std::size_t>(chosen.window)]);
      d.action = Action::Async;
      d.rule = "solver";
      d.window_id = w->id;
      d.predicted_cost_ms = cands[i].cost;
      d.blocker = formats::Blocker::None;
      for (auto& [name, value] :
           formats::NamedValues{{"saving_ms", cands[i].saving},
                                {"consumers", static_cast<double>(d.consumers.size())},
                                {"handoff_ms", o.async_overhead_ms},
                                {"cost_ms", cands[i].cost},
                                {"window_kind", w->kind},
                                {"window", static_cast<double>(w->id)},
                                {"after_op", static_cast<double>(w->after_op_id)},
                                {"before_op", static_cast<double>(w->before_op_id)},
                                {"window_ms", w->duration_ms}})
        formats::setValue(d.values, name, std::move(value));
      d.reason = wording::reason(siteOf(cands[i]), d);
    } else if (action == Action::None && d.action != Action::None) {
      d.action = Action::None;
      d.rule = o.memory_budget_bytes ? "memory-budget" : "solver";
      d.blocker = formats::Blocker::Plan;
      d.reason = wording::reason(siteOf(cands[i]), d);
    }
    if (d.action != Action::Sync && d.action != Action::Remove)
      d.fused_template_input.reset(); // only a conversion made (or kept) right after its producer
    s.decisions.push_back(std::move(d));
  }
  // Layout regions (the model frozen): each runs in its fastest measured layout. A value
  // decision about an op of a region that changes layout is the region's to make.
  double region_gain = 0, dropped_gain = 0;
  const auto regions = decideRegions(p, cost, o, gainFloor(p, o));
  const ChosenRegions chosen(regions); // their ops indexed once, for every decision below
  for (auto& d : s.decisions) {
    std::optional<std::int64_t> region;
    if (d.action != Action::None && (region = chosen.regionOf(d, p))) {
      dropped_gain += d.predicted_saving_ms - d.predicted_cost_ms;
      d.action = Action::None;
      d.window_id.reset();
      d.fused_template_input.reset();
      d.rule = "layout-region";
      d.blocker = formats::Blocker::Plan;
      formats::setValue(d.values, "region", static_cast<double>(*region));
      d.reason = wording::reason(wording::Site::Value, d);
    }
  }
  for (const auto& r : regions) {
    region_gain += r.gain;
    s.decisions.push_back(r.decision);
  }
  // A region timed whole counts by that time, not by its ops' per-op times: xprof times each
  // region's ops as one graph without hooks (what the region gains are differences of), while
  // per-op timing adds the hooks' cost to every op and leaves out what runs between them. So
  // before and after are in one unit: ShuffleNetV2's 18 regions summed 7.9 ms op by op and 9.6
  // timed whole (the model ran 10.9), and the plan predicted 1.4 ms where it ran 3.3.
  const double whole = regionsTimedWhole(p);
  m.predicted_time_before_ms += whole;
  m.predicted_time_after_ms =
      m.predicted_time_before_ms - sol.gain + std::max(0.0, dropped_gain) - region_gain;
  m.predicted_time_bound_ms = m.predicted_time_before_ms - sol.bound;
  if (!m.whole_run && p.settings.model_run_ms > 0)
    predictWholeRun(p.settings.model_run_ms, arenaScoped(regions), m);
  m.peak_bytes_after = predictedPeakBytes(p, storages, s.decisions);
  XALLOC_EXPECTS(!o.memory_budget_bytes || m.peak_bytes_after <= *o.memory_budget_bytes,
                 "the plan's peak " + std::to_string(m.peak_bytes_after) +
                     " stays within the budget the solver enforced");
  return s;
}

} // namespace xalloc::scheduler
