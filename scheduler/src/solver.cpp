// The exact scheduler's public face: feasibility, the greedy seed, solve() over the independent
// groups (solver_groups.cpp) searched by branch and bound (solver_search.cpp), and brute force.
#include "xalloc/scheduler/problem.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "solver_internal.h"
#include "xalloc/error.h"

namespace xalloc::scheduler {

using detail::fits;
using detail::kEps;
using detail::LiveTree;

double Solution::gap() const {
  if (optimal || bound <= 0)
    return 0;
  return std::max(0.0, (bound - gain) / bound);
}

void checkProblem(const Problem& p) {
  for (std::size_t i = 0; i < p.sites.size(); ++i) {
    const auto& s = p.sites[i];
    XALLOC_EXPECTS(!s.options.empty() && s.options[0].gain == 0 && s.options[0].window < 0 &&
                       s.options[0].memory.empty(),
                   "site " + std::to_string(i) + ": option 0 must be the empty option");
    for (const auto& o : s.options) {
      XALLOC_EXPECTS(std::isfinite(o.gain) && std::isfinite(o.load) && o.load >= 0,
                     "site " + std::to_string(i) + ": gain and load must be finite, load >= 0");
      XALLOC_EXPECTS(o.window < static_cast<int>(p.window_capacity.size()),
                     "site " + std::to_string(i) + ": window index out of range");
    }
  }
  for (double c : p.window_capacity)
    XALLOC_EXPECTS(std::isfinite(c) && c >= 0, "window capacities must be finite and >= 0");
}

std::int64_t planPeak(const Problem& p, const std::vector<int>& choice) {
  LiveTree t(p.base_live);
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    t.add(p.sites[i].options[static_cast<std::size_t>(choice[i])].memory, +1);
  return p.base_live.empty() && p.sites.empty() ? 0 : t.peak();
}

std::optional<double> evaluate(const Problem& p, const std::vector<int>& choice) {
  XALLOC_EXPECTS(choice.size() == p.sites.size(), "one choice per site");
  std::vector<double> load(p.window_capacity.size(), 0.0);
  double gain = 0;
  for (std::size_t i = 0; i < p.sites.size(); ++i) {
    const Option& o = p.sites[i].options[static_cast<std::size_t>(choice[i])];
    gain += o.gain;
    if (o.window >= 0)
      load[static_cast<std::size_t>(o.window)] += o.load;
  }
  for (std::size_t w = 0; w < load.size(); ++w)
    if (!fits(load[w], p.window_capacity[w]))
      return std::nullopt;
  if (p.memory_budget && planPeak(p, choice) > *p.memory_budget)
    return std::nullopt;
  return gain;
}

Solution greedy(const Problem& p) {
  Solution s;
  s.method = "greedy";
  s.choice.assign(p.sites.size(), 0);
  // Candidate (site, option) pairs with a positive gain, best gain per unit of scarce resource
  // first: window time for async options, bytes under a budget.
  struct Cand {
    std::size_t site, option;
    double key;
  };
  std::vector<Cand> cands;
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    for (std::size_t k = 1; k < p.sites[i].options.size(); ++k) {
      const Option& o = p.sites[i].options[k];
      if (o.gain <= 0)
        continue;
      double use = o.window >= 0 ? o.load : 0;
      if (p.memory_budget)
        for (const auto& d : o.memory)
          use += std::max<std::int64_t>(d.bytes, 0) * 1e-9;
      cands.push_back({i, k, use > 0 ? o.gain / use : std::numeric_limits<double>::infinity()});
    }
  std::stable_sort(cands.begin(), cands.end(), [&](const Cand& a, const Cand& b) {
    if (a.key != b.key)
      return a.key > b.key;
    return p.sites[a.site].options[a.option].gain > p.sites[b.site].options[b.option].gain;
  });
  LiveTree tree(p.base_live);
  std::vector<double> load(p.window_capacity.size(), 0.0);
  for (const Cand& c : cands) {
    const Option& now = p.sites[c.site].options[static_cast<std::size_t>(s.choice[c.site])];
    const Option& o = p.sites[c.site].options[c.option];
    if (o.gain <= now.gain)
      continue;
    if (o.window >= 0 && o.window != now.window &&
        !fits(load[static_cast<std::size_t>(o.window)] + o.load,
              p.window_capacity[static_cast<std::size_t>(o.window)]))
      continue;
    if (o.window >= 0 && o.window == now.window &&
        !fits(load[static_cast<std::size_t>(o.window)] - now.load + o.load,
              p.window_capacity[static_cast<std::size_t>(o.window)]))
      continue;
    if (p.memory_budget) {
      tree.add(now.memory, -1);
      tree.add(o.memory, +1);
      if (tree.peak() > *p.memory_budget) {
        tree.add(o.memory, -1);
        tree.add(now.memory, +1);
        continue;
      }
    }
    if (now.window >= 0)
      load[static_cast<std::size_t>(now.window)] -= now.load;
    if (o.window >= 0)
      load[static_cast<std::size_t>(o.window)] += o.load;
    s.choice[c.site] = static_cast<int>(c.option);
  }
  auto g = evaluate(p, s.choice);
  s.gain = g ? *g : -std::numeric_limits<double>::infinity();
  s.bound = std::numeric_limits<double>::infinity();
  return s;
}

namespace {

// Local search on a feasible plan, for groups the search could not finish: single-site changes
// that gain, then pairs where one site gives up what it uses so another can take a better
// option. Stops when no move gains or at the deadline. Never makes the plan infeasible.
void improveLocally(const Problem& p, std::vector<int>& choice,
                    std::chrono::steady_clock::time_point deadline) {
  const std::size_t n = p.sites.size();
  std::vector<double> load(p.window_capacity.size(), 0.0);
  LiveTree tree(p.memory_budget ? p.base_live : std::vector<std::int64_t>{});
  for (std::size_t i = 0; i < n; ++i) {
    const Option& o = p.sites[i].options[static_cast<std::size_t>(choice[i])];
    if (o.window >= 0)
      load[static_cast<std::size_t>(o.window)] += o.load;
    if (p.memory_budget)
      tree.add(o.memory, +1);
  }
  // Switches site i to option k when the plan stays feasible; returns whether it did.
  auto trySwitch = [&](std::size_t i, int k) {
    const Option& from = p.sites[i].options[static_cast<std::size_t>(choice[i])];
    const Option& to = p.sites[i].options[static_cast<std::size_t>(k)];
    if (to.window >= 0) {
      const double now =
          load[static_cast<std::size_t>(to.window)] - (from.window == to.window ? from.load : 0.0);
      if (!fits(now + to.load, p.window_capacity[static_cast<std::size_t>(to.window)]))
        return false;
    }
    if (p.memory_budget) {
      tree.add(from.memory, -1);
      tree.add(to.memory, +1);
      if (tree.peak() > *p.memory_budget) {
        tree.add(to.memory, -1);
        tree.add(from.memory, +1);
        return false;
      }
    }
    if (from.window >= 0)
      load[static_cast<std::size_t>(from.window)] -= from.load;
    if (to.window >= 0)
      load[static_cast<std::size_t>(to.window)] += to.load;
    choice[i] = k;
    return true;
  };
  auto gainOf = [&](std::size_t i, int k) {
    return p.sites[i].options[static_cast<std::size_t>(k)].gain;
  };
  bool improved = true;
  while (improved && std::chrono::steady_clock::now() < deadline) {
    improved = false;
    for (std::size_t i = 0; i < n; ++i)
      for (int k = 0; k < static_cast<int>(p.sites[i].options.size()); ++k)
        if (gainOf(i, k) > gainOf(i, choice[i]) + kEps && trySwitch(i, k))
          improved = true;
    for (std::size_t a = 0; a < n && !improved; ++a) {
      if (std::chrono::steady_clock::now() > deadline)
        return;
      const int a_was = choice[a];
      for (int ka = 0; ka < static_cast<int>(p.sites[a].options.size()) && !improved; ++ka) {
        if (ka == a_was || !trySwitch(a, ka))
          continue;
        const double lost = gainOf(a, a_was) - gainOf(a, ka);
        for (std::size_t b = 0; b < n && !improved; ++b) {
          if (b == a)
            continue;
          const int b_was = choice[b];
          for (int kb = 0; kb < static_cast<int>(p.sites[b].options.size()); ++kb)
            if (gainOf(b, kb) - gainOf(b, b_was) > lost + kEps && trySwitch(b, kb)) {
              improved = true;
              break;
            }
        }
        if (!improved)
          trySwitch(a, a_was); // undo: always feasible, it was the plan before
      }
    }
  }
}

} // namespace

Solution solve(const Problem& p, const SolveLimits& limits) {
  checkProblem(p);
  Solution seed = greedy(p);
  Solution out;
  out.method = "branch-and-bound";
  out.choice = seed.choice;
  out.optimal = true;
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(static_cast<std::int64_t>(limits.time_limit_ms * 1000));
  double bound = 0;
  for (const detail::Group& g : detail::groupsOf(p)) {
    SolveLimits group_limits = limits;
    group_limits.node_limit = std::max<std::int64_t>(0, limits.node_limit - out.nodes);
    const detail::GroupResult r =
        detail::searchGroup(p, g, group_limits, deadline, seed.choice, std::isfinite(seed.gain));
    out.nodes += r.nodes;
    for (std::size_t k = 0; k < r.order.size(); ++k)
      out.choice[static_cast<std::size_t>(r.order[k])] = r.choice[k];
    if (!r.finished)
      out.optimal = false;
    bound += r.finished ? r.gain : std::max(r.gain, r.open_bound);
  }
  auto g = evaluate(p, out.choice);
  if (!g) // no feasible plan was found (only possible under a memory budget)
    throw InputError("xsched", "no plan fits the memory budget");
  if (!out.optimal) {
    // The search stopped early: spend what is left of the time limit (at least a tenth of
    // it) improving the plan locally.
    const auto floor =
        std::chrono::steady_clock::now() +
        std::chrono::microseconds(static_cast<std::int64_t>(limits.time_limit_ms * 100));
    improveLocally(p, out.choice, std::max(deadline, floor));
    g = evaluate(p, out.choice);
    XALLOC_EXPECTS(g.has_value(), "local search keeps the plan feasible");
    out.method = "branch-and-bound + local search";
  }
  out.gain = *g;
  out.bound = out.optimal ? out.gain : std::max(bound, out.gain);
  return out;
}

Solution bruteForce(const Problem& p) {
  checkProblem(p);
  Solution best;
  best.method = "brute force";
  best.gain = -std::numeric_limits<double>::infinity();
  std::vector<int> choice(p.sites.size(), 0);
  while (true) {
    if (auto g = evaluate(p, choice); g && *g > best.gain + kEps) {
      best.gain = *g;
      best.choice = choice;
    }
    ++best.nodes;
    std::size_t i = 0;
    for (; i < choice.size(); ++i) {
      if (++choice[i] < static_cast<int>(p.sites[i].options.size()))
        break;
      choice[i] = 0;
    }
    if (i == choice.size())
      break;
  }
  best.bound = best.gain;
  best.optimal = true;
  return best;
}

} // namespace xalloc::scheduler
