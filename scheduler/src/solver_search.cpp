// searchGroup: depth-first branch and bound over one group's sites: the window bound (a
// fractional knapsack over the group's capacity) here, the memory and Lagrangian bounds in
// solver_bounds.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "solver_bounds.h"
#include "solver_internal.h"

namespace xalloc::scheduler::detail {

namespace {

// Depth-first branch and bound over one group's sites.
class Search {
public:
  Search(const Problem& p, const Group& g, const SolveLimits& limits,
         std::chrono::steady_clock::time_point deadline)
      : p_(p), limits_(limits), deadline_(deadline), memory_(g.memory),
        tree_(g.memory ? p.base_live : std::vector<std::int64_t>{}), capacity_(p.window_capacity) {
    order_ = g.sites;
    auto best = [&](int i) {
      double b = 0;
      for (const auto& o : p_.sites[static_cast<std::size_t>(i)].options)
        b = std::max(b, o.gain);
      return b;
    };
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return best(a) > best(b); });
    const std::size_t n = order_.size();
    plain_suffix_.assign(n + 1, 0);
    bonus_.assign(n, 0);
    weight_.assign(n, 0);
    for (std::size_t k = n; k-- > 0;) {
      const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
      double plain = 0;
      for (const auto& o : s.options)
        if (o.window < 0)
          plain = std::max(plain, o.gain);
      double bonus = 0, density = 0;
      for (const auto& o : s.options)
        if (o.window >= 0 && o.gain > plain) {
          bonus = std::max(bonus, o.gain - plain);
          density = o.load <= 0 ? std::numeric_limits<double>::infinity()
                                : std::max(density, (o.gain - plain) / o.load);
        }
      plain_suffix_[k] = plain_suffix_[k + 1] + plain;
      bonus_[k] = bonus;
      weight_[k] = bonus > 0 && std::isfinite(density) ? bonus / density : 0;
    }
    // Bonus items by density, for the fractional knapsack bound over the group's capacity.
    by_density_.resize(n);
    std::iota(by_density_.begin(), by_density_.end(), 0);
    std::stable_sort(by_density_.begin(), by_density_.end(), [&](std::size_t a, std::size_t b) {
      return bonus_[a] * weight_[b] > bonus_[b] * weight_[a];
    });
    for (int w : g.windows)
      group_capacity_ += p_.window_capacity[static_cast<std::size_t>(w)];
    choice_.assign(n, 0);
    if (memory_) {
      for (int i : order_) {
        negative_.push_back(negativePart(p_.sites[static_cast<std::size_t>(i)]));
        tree_.add(negative_.back(), +1);
      }
      memory_bound_.prepare(p_, order_, g.binding);
      binding_ = g.binding;
      group_windows_ = g.windows;
    } else {
      negative_.resize(n);
    }
  }

  // Runs the search from `incumbent` (a feasible choice per group site, in group order).
  void run(const std::vector<int>& incumbent, double incumbent_gain) {
    best_choice_ = incumbent;
    best_gain_ = incumbent_gain;
    if (memory_)
      lagrange_.prepare(p_, order_, binding_, group_windows_, incumbent_gain);
    dfs(0, 0.0);
  }

  double bestGain() const { return best_gain_; }
  const std::vector<int>& bestChoice() const { return best_choice_; }
  const std::vector<int>& order() const { return order_; }
  bool finished() const { return !aborted_; }
  double openBound() const { return open_bound_; }
  std::int64_t nodes() const { return nodes_; }

private:
  double bound(std::size_t k, double gain) const {
    double b = windowBound(k, gain);
    if (!memory_bound_.empty())
      b = std::min(b, memory_bound_.at(k, gain));
    if (lagrange_.ready())
      b = std::min(b, lagrange_.at(k, gain));
    return b;
  }

  double windowBound(std::size_t k, double gain) const {
    double b = gain + plain_suffix_[k];
    double cap = group_capacity_ - used_;
    for (std::size_t j : by_density_) {
      if (j < k || bonus_[j] <= 0)
        continue;
      if (weight_[j] <= cap) {
        b += bonus_[j];
        cap -= weight_[j];
      } else {
        b += bonus_[j] * (cap / weight_[j]);
        break;
      }
    }
    return b;
  }

  bool outOfBudget() {
    if (nodes_ >= limits_.node_limit)
      return true;
    if ((nodes_ & 1023) == 0 && std::chrono::steady_clock::now() > deadline_)
      return true;
    return false;
  }

  void dfs(std::size_t k, double gain) {
    ++nodes_;
    const double b = bound(k, gain);
    if (b <= best_gain_ + kEps * std::max(1.0, std::abs(best_gain_)))
      return;
    if (aborted_ || outOfBudget()) {
      aborted_ = true;
      open_bound_ = std::max(open_bound_, b);
      return;
    }
    if (k == order_.size()) {
      best_gain_ = gain;
      best_choice_ = choice_;
      return;
    }
    const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
    std::vector<std::size_t> opts(s.options.size());
    std::iota(opts.begin(), opts.end(), 0);
    std::stable_sort(opts.begin(), opts.end(), [&](std::size_t a, std::size_t c) {
      if (lagrange_.ready()) // penalised gain: what the option is worth given what it uses
        return s.options[a].gain - lagrange_.penalty(k, a) >
               s.options[c].gain - lagrange_.penalty(k, c);
      return s.options[a].gain > s.options[c].gain;
    });
    if (memory_)
      tree_.add(negative_[k], -1);
    for (std::size_t oi : opts) {
      const Option& o = s.options[oi];
      if (aborted_) {
        open_bound_ = std::max(open_bound_, b);
        break;
      }
      if (o.window >= 0 && !fits(load_[static_cast<std::size_t>(o.window)] + o.load,
                                 capacity_[static_cast<std::size_t>(o.window)]))
        continue;
      if (memory_) {
        tree_.add(o.memory, +1);
        const bool over = tree_.peak() > *p_.memory_budget;
        if (over) {
          tree_.add(o.memory, -1);
          continue;
        }
      }
      if (o.window >= 0) {
        load_[static_cast<std::size_t>(o.window)] += o.load;
        used_ += o.load;
      }
      choice_[k] = static_cast<int>(oi);
      memory_bound_.decide(k, oi, +1);
      if (lagrange_.ready())
        lagrange_.decide(k, oi, +1);
      dfs(k + 1, gain + o.gain);
      if (lagrange_.ready())
        lagrange_.decide(k, oi, -1);
      memory_bound_.decide(k, oi, -1);
      choice_[k] = 0;
      if (o.window >= 0) {
        load_[static_cast<std::size_t>(o.window)] -= o.load;
        used_ -= o.load;
      }
      if (memory_)
        tree_.add(o.memory, -1);
    }
    if (memory_)
      tree_.add(negative_[k], +1);
  }

  const Problem& p_;
  SolveLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  bool memory_;
  LiveTree tree_;
  MemoryBound memory_bound_;
  LagrangeBound lagrange_;
  std::vector<std::int64_t> binding_;
  std::vector<int> group_windows_;
  std::vector<double> capacity_;
  std::vector<double> load_ = std::vector<double>(capacity_.size(), 0.0);
  double used_ = 0, group_capacity_ = 0;
  std::vector<int> order_;
  std::vector<double> plain_suffix_, bonus_, weight_;
  std::vector<std::size_t> by_density_;
  std::vector<std::vector<MemDelta>> negative_;
  std::vector<int> choice_, best_choice_;
  double best_gain_ = -std::numeric_limits<double>::infinity();
  double open_bound_ = -std::numeric_limits<double>::infinity();
  bool aborted_ = false;
  std::int64_t nodes_ = 0;
};

} // namespace

GroupResult searchGroup(const Problem& p, const Group& g, const SolveLimits& limits,
                        std::chrono::steady_clock::time_point deadline,
                        const std::vector<int>& seed, bool seed_feasible) {
  Search search(p, g, limits, deadline);
  GroupResult r;
  r.order = search.order();
  std::vector<int> start(r.order.size(), 0);
  double start_gain = -std::numeric_limits<double>::infinity();
  if (seed_feasible) {
    start_gain = 0;
    for (std::size_t k = 0; k < start.size(); ++k) {
      const auto i = static_cast<std::size_t>(r.order[k]);
      start[k] = seed[i];
      start_gain += p.sites[i].options[static_cast<std::size_t>(start[k])].gain;
    }
  }
  search.run(start, start_gain);
  r.choice = search.bestChoice();
  r.gain = search.bestGain();
  r.finished = search.finished();
  r.open_bound = search.openBound();
  r.nodes = search.nodes();
  return r;
}

} // namespace xalloc::scheduler::detail
