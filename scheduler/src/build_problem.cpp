// buildProblem: the solver's problem from xsched's candidates (build_problem.h).
#include "build_problem.h"

#include <algorithm>

#include "memory_internal.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;

namespace {

// The windows a site may use: after its producer has finished, before its first converted
// consumer starts. Capacity is what one side worker gets done in the window, after the safety
// factor.
double windowCapacity(const formats::IdleEvent& w, const SchedOptions& o) {
  const double share = std::min(w.spare_cores, static_cast<double>(std::max(o.async_workers, 1)));
  return std::max(0.0, w.duration_ms * share) * o.window_safety;
}

} // namespace

Built buildProblem(const Profile& p, const Storages& st, const std::vector<Candidate>& cands,
                   const std::vector<std::vector<std::size_t>>& groups, const SchedOptions& o) {
  Built b;
  std::vector<std::int64_t> diff(static_cast<std::size_t>(st.positions) + 1, 0);
  for (const auto& [id, iv] : st.intervals) {
    diff[static_cast<std::size_t>(std::max<std::int64_t>(iv.first, 0))] += iv.bytes;
    diff[static_cast<std::size_t>(std::min(iv.last + 1, st.positions))] -= iv.bytes;
  }
  b.problem.base_live.resize(static_cast<std::size_t>(st.positions));
  std::int64_t live = 0;
  for (std::size_t t = 0; t < b.problem.base_live.size(); ++t)
    b.problem.base_live[t] = live += diff[t];
  b.problem.memory_budget = o.memory_budget_bytes;
  // Only the runtime runs a conversion on a side worker: a portable plan has no async.
  if (o.allow_async && o.form == formats::RewriteForm::Fast)
    for (const auto& w : p.gpu_idle_events) {
      b.window_ids.push_back(w.id);
      b.problem.window_capacity.push_back(windowCapacity(w, o));
    }
  b.site_of.resize(cands.size());
  for (const auto& group : groups) {
    const Candidate& c = cands[group.front()];
    Site site;
    site.options.push_back({static_cast<int>(Action::None), -1, 0, 0, {}});
    const Decision& d = c.decision;
    // A group's members all took d's action (reconcile): one option for all of them.
    if (d.action == Action::Sync || d.action == Action::Remove) {
      Option opt{static_cast<int>(d.action), -1, 0, 0, {}};
      for (std::size_t i : group) {
        const Decision& m = cands[i].decision;
        if (m.action == Action::Sync) {
          opt.gain += m.predicted_saving_ms - m.predicted_cost_ms;
          if (auto iv = copyInterval(p, m))
            opt.memory.push_back({iv->first, iv->last, iv->bytes});
        } else {
          opt.gain += m.predicted_cost_ms - m.predicted_saving_ms;
          for (const MemDelta& delta : removeDeltas(p, st, m))
            opt.memory.push_back(delta);
        }
      }
      site.options.push_back(std::move(opt));
    }
    for (std::size_t i : group)
      b.site_of[i] = b.problem.sites.size();
    if (c.can_async && !d.consumers.empty()) {
      const std::int64_t c1 = *std::min_element(d.consumers.begin(), d.consumers.end());
      for (std::size_t w = 0; w < b.window_ids.size(); ++w) {
        const auto& ev = *findWindow(p, b.window_ids[w]);
        // Windows are moments of one call: each of a program site's calls converts in its own.
        const double per_conversion = c.cost / std::max(1.0, c.conversions);
        if (ev.after_op_id < d.producer || ev.before_op_id > c1 ||
            per_conversion > b.problem.window_capacity[w])
          continue;
        Decision as = d;
        as.action = Action::Async;
        as.window_id = ev.id;
        auto iv = copyInterval(p, as);
        Option opt{static_cast<int>(Action::Async),
                   static_cast<int>(w),
                   c.saving - o.async_overhead_ms * std::max(1.0, c.conversions),
                   per_conversion,
                   {}};
        if (iv)
          opt.memory.push_back({iv->first, iv->last, iv->bytes});
        site.options.push_back(opt);
      }
    }
    b.problem.sites.push_back(std::move(site));
  }
  return b;
}

std::int64_t smallestFeasiblePeak(const Profile& p, const Storages& st,
                                  const std::vector<Candidate>& cands,
                                  const std::vector<std::vector<std::size_t>>& groups) {
  std::vector<Decision> plan;
  std::int64_t best = predictedPeakBytes(p, st, plan);
  for (const auto& group : groups) {
    if (cands[group.front()].decision.action != Action::Remove)
      continue;
    for (std::size_t i : group)
      plan.push_back(cands[i].decision);
    const std::int64_t peak = predictedPeakBytes(p, st, plan);
    if (peak < best)
      best = peak;
    else
      plan.resize(plan.size() - group.size());
  }
  return best;
}

} // namespace xalloc::scheduler
