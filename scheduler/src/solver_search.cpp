// searchGroup: depth-first branch and bound over one group's sites, with window, per-position
// memory and Lagrangian bounds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

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
      prepareMemoryBound(g.binding);
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
      lagrange(incumbent_gain);
    dfs(0, 0.0);
  }

  double bestGain() const { return best_gain_; }
  const std::vector<int>& bestChoice() const { return best_choice_; }
  const std::vector<int>& order() const { return order_; }
  bool finished() const { return !aborted_; }
  double openBound() const { return open_bound_; }
  std::int64_t nodes() const { return nodes_; }

private:
  // The memory bound: at a few positions where the budget binds hardest, the sites compete for
  // what is left of the budget there; the LP relaxation of that multiple-choice knapsack
  // (upper convex hull of each site's options, segments taken by decreasing gain per byte)
  // bounds what the undecided sites can still gain.
  struct Segment {
    std::size_t k; // site, in branching order
    double bytes;  // extra bytes over the previous hull point
    double gain;   // extra gain
  };
  struct MemPoint {
    std::int64_t t = 0;
    std::vector<std::vector<std::int64_t>> weight; // [k][option] bytes at t
    std::vector<std::int64_t> min_suffix;          // sum over k' >= k of the lightest option
    std::vector<double> start_suffix;              // sum over k' >= k of that option's gain
    std::vector<Segment> segments;                 // by decreasing gain per byte
    std::int64_t decided = 0;                      // bytes at t of the decided sites' choices
  };

  void prepareMemoryBound(const std::vector<std::int64_t>& binding) {
    constexpr std::size_t kPoints = 8;
    const std::size_t n = order_.size();
    // Live bytes if every site took its best option: where this is furthest over the budget.
    std::vector<std::int64_t> diff(p_.base_live.size() + 1, 0);
    for (int i : order_) {
      const Site& s = p_.sites[static_cast<std::size_t>(i)];
      std::size_t best = 0;
      for (std::size_t o = 0; o < s.options.size(); ++o)
        if (s.options[o].gain > s.options[best].gain)
          best = o;
      for (const auto& d : s.options[best].memory) {
        const auto lo = static_cast<std::size_t>(
            std::clamp<std::int64_t>(d.first, 0, static_cast<std::int64_t>(p_.base_live.size())));
        const auto hi = static_cast<std::size_t>(std::clamp<std::int64_t>(
            d.last + 1, 0, static_cast<std::int64_t>(p_.base_live.size())));
        if (lo < hi) {
          diff[lo] += d.bytes;
          diff[hi] -= d.bytes;
        }
      }
    }
    std::vector<std::int64_t> relaxed(p_.base_live.size());
    std::int64_t acc = 0;
    for (std::size_t t = 0; t < relaxed.size(); ++t)
      relaxed[t] = p_.base_live[t] + (acc += diff[t]);
    std::vector<std::int64_t> cand = binding;
    std::stable_sort(cand.begin(), cand.end(), [&](std::int64_t a, std::int64_t b) {
      return relaxed[static_cast<std::size_t>(a)] > relaxed[static_cast<std::size_t>(b)];
    });
    std::vector<std::int64_t> picked;
    for (std::int64_t t : cand) {
      if (picked.size() == kPoints)
        break;
      bool near = false;
      for (std::int64_t q : picked)
        near |= std::llabs(q - t) <= 2;
      if (!near)
        picked.push_back(t);
    }
    for (std::int64_t t : picked) {
      MemPoint m;
      m.t = t;
      m.weight.resize(n);
      m.min_suffix.assign(n + 1, 0);
      m.start_suffix.assign(n + 1, 0);
      for (std::size_t k = n; k-- > 0;) {
        const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
        std::vector<std::pair<std::int64_t, double>> pts;
        for (const auto& o : s.options) {
          std::int64_t w = 0;
          for (const auto& d : o.memory)
            if (d.first <= t && t <= d.last)
              w += d.bytes;
          m.weight[k].push_back(w);
          pts.push_back({w, o.gain});
        }
        // Upper concave hull from the lightest option, keeping only points that gain more.
        std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
          return a.first != b.first ? a.first < b.first : a.second > b.second;
        });
        std::vector<std::pair<std::int64_t, double>> hull;
        for (const auto& q : pts) {
          if (!hull.empty() && (q.first == hull.back().first || q.second <= hull.back().second))
            continue;
          while (hull.size() >= 2) {
            const auto& a = hull[hull.size() - 2];
            const auto& b = hull.back();
            // Drop b when it lies on or below the line from a to q.
            const double lhs = (b.second - a.second) * static_cast<double>(q.first - a.first);
            const double rhs = (q.second - a.second) * static_cast<double>(b.first - a.first);
            if (lhs <= rhs)
              hull.pop_back();
            else
              break;
          }
          hull.push_back(q);
        }
        m.min_suffix[k] = m.min_suffix[k + 1] + hull.front().first;
        m.start_suffix[k] = m.start_suffix[k + 1] + hull.front().second;
        for (std::size_t h = 1; h < hull.size(); ++h)
          m.segments.push_back({k, static_cast<double>(hull[h].first - hull[h - 1].first),
                                hull[h].second - hull[h - 1].second});
      }
      std::stable_sort(
          m.segments.begin(), m.segments.end(),
          [](const Segment& a, const Segment& b) { return a.gain * b.bytes > b.gain * a.bytes; });
      points_.push_back(std::move(m));
    }
  }

  // Lagrangian relaxation of the budget at every binding position and of every window's
  // capacity: with multipliers lambda (per byte at a position) and mu (per ms of a window), each
  // site picks the option with the best penalised gain, and
  //   gain <= sum_k max_o (g_ko - lambda.w_ko - mu.load_ko) + lambda.(budget - base) + mu.cap
  // for every plan. Subgradient steps at the root find good multipliers; inside the tree they
  // stay fixed, which keeps the bound O(1) per node (suffix sums plus what the decided sites
  // used), and they order the options to try.
  void lagrange(double incumbent) {
    const std::size_t n = order_.size(), nt = binding_.size(), nw = group_windows_.size();
    if (n == 0 || nt == 0)
      return;
    std::vector<int> win_index(p_.window_capacity.size(), -1);
    for (std::size_t w = 0; w < nw; ++w)
      win_index[static_cast<std::size_t>(group_windows_[w])] = static_cast<int>(w);
    struct Span {
      std::size_t lo, hi; // binding indices [lo, hi)
      double bytes;
    };
    std::vector<std::vector<std::vector<Span>>> spans(n); // [k][o]
    for (std::size_t k = 0; k < n; ++k) {
      const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
      spans[k].resize(s.options.size());
      for (std::size_t o = 0; o < s.options.size(); ++o)
        for (const auto& d : s.options[o].memory) {
          const auto lo = static_cast<std::size_t>(
              std::lower_bound(binding_.begin(), binding_.end(), d.first) - binding_.begin());
          const auto hi = static_cast<std::size_t>(
              std::upper_bound(binding_.begin(), binding_.end(), d.last) - binding_.begin());
          if (lo < hi && d.bytes != 0)
            spans[k][o].push_back({lo, hi, static_cast<double>(d.bytes)});
        }
    }
    std::vector<double> room(nt), cap(nw);
    for (std::size_t i = 0; i < nt; ++i)
      room[i] = static_cast<double>(*p_.memory_budget -
                                    p_.base_live[static_cast<std::size_t>(binding_[i])]);
    for (std::size_t w = 0; w < nw; ++w)
      cap[w] = p_.window_capacity[static_cast<std::size_t>(group_windows_[w])];
    std::vector<double> lambda(nt, 0.0), mu(nw, 0.0), prefix(nt + 1);
    std::vector<double> best_lambda = lambda, best_mu = mu;
    double best_l = std::numeric_limits<double>::infinity();
    double alpha = 2.0;
    int since_better = 0;
    const double target = std::isfinite(incumbent) ? incumbent : 0.0;
    std::vector<double> used(nt + 1), load(nw);
    auto penalty = [&](std::size_t k, std::size_t o) {
      double pen = 0;
      for (const Span& sp : spans[k][o])
        pen += sp.bytes * (prefix[sp.hi] - prefix[sp.lo]);
      const Option& opt = p_.sites[static_cast<std::size_t>(order_[k])].options[o];
      if (opt.window >= 0)
        pen += mu[static_cast<std::size_t>(win_index[static_cast<std::size_t>(opt.window)])] *
               opt.load;
      return pen;
    };
    for (int it = 0; it < 500; ++it) {
      prefix[0] = 0;
      for (std::size_t i = 0; i < nt; ++i)
        prefix[i + 1] = prefix[i] + lambda[i];
      double l = 0;
      for (std::size_t i = 0; i < nt; ++i)
        l += lambda[i] * room[i];
      for (std::size_t w = 0; w < nw; ++w)
        l += mu[w] * cap[w];
      std::fill(used.begin(), used.end(), 0.0);
      std::fill(load.begin(), load.end(), 0.0);
      for (std::size_t k = 0; k < n; ++k) {
        const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
        std::size_t best = 0;
        double best_v = -std::numeric_limits<double>::infinity();
        for (std::size_t o = 0; o < s.options.size(); ++o) {
          const double v = s.options[o].gain - penalty(k, o);
          if (v > best_v) {
            best_v = v;
            best = o;
          }
        }
        l += best_v;
        for (const Span& sp : spans[k][best]) {
          used[sp.lo] += sp.bytes;
          used[sp.hi] -= sp.bytes;
        }
        if (s.options[best].window >= 0)
          load[static_cast<std::size_t>(
              win_index[static_cast<std::size_t>(s.options[best].window)])] += s.options[best].load;
      }
      if (l < best_l - 1e-12) {
        best_l = l;
        best_lambda = lambda;
        best_mu = mu;
        since_better = 0;
      } else if (++since_better >= 10) {
        alpha /= 2;
        since_better = 0;
      }
      // Subgradient: how far each constraint is from binding under this relaxed choice.
      double norm = 0, acc = 0;
      std::vector<double> g(nt), h(nw);
      for (std::size_t i = 0; i < nt; ++i) {
        acc += used[i];
        g[i] = room[i] - acc;
        if (!(lambda[i] <= 0 && g[i] > 0))
          norm += g[i] * g[i];
      }
      for (std::size_t w = 0; w < nw; ++w) {
        h[w] = cap[w] - load[w];
        if (!(mu[w] <= 0 && h[w] > 0))
          norm += h[w] * h[w];
      }
      if (norm <= 0 || alpha < 1e-4 || l - target <= 1e-9)
        break;
      const double step = alpha * (l - target) / norm;
      for (std::size_t i = 0; i < nt; ++i)
        lambda[i] = std::max(0.0, lambda[i] - step * g[i]);
      for (std::size_t w = 0; w < nw; ++w)
        mu[w] = std::max(0.0, mu[w] - step * h[w]);
    }
    // Fix the best multipliers: per option penalties, suffix sums of the best penalised gains.
    lambda = best_lambda;
    mu = best_mu;
    prefix[0] = 0;
    for (std::size_t i = 0; i < nt; ++i)
      prefix[i + 1] = prefix[i] + lambda[i];
    lag_const_ = 0;
    for (std::size_t i = 0; i < nt; ++i)
      lag_const_ += lambda[i] * room[i];
    for (std::size_t w = 0; w < nw; ++w)
      lag_const_ += mu[w] * cap[w];
    lag_penalty_.assign(n, {});
    lag_suffix_.assign(n + 1, 0.0);
    for (std::size_t k = n; k-- > 0;) {
      const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
      double best_v = -std::numeric_limits<double>::infinity();
      for (std::size_t o = 0; o < s.options.size(); ++o) {
        lag_penalty_[k].push_back(penalty(k, o));
        best_v = std::max(best_v, s.options[o].gain - lag_penalty_[k].back());
      }
      lag_suffix_[k] = lag_suffix_[k + 1] + best_v;
    }
    lag_ready_ = true;
  }

  double lagrangeBound(std::size_t k, double gain) const {
    return gain + lag_suffix_[k] + lag_const_ - lag_decided_;
  }

  double memoryBound(std::size_t k, double gain) const {
    double best = std::numeric_limits<double>::infinity();
    for (const MemPoint& m : points_) {
      double cap =
          static_cast<double>(*p_.memory_budget - p_.base_live[static_cast<std::size_t>(m.t)] -
                              m.decided - m.min_suffix[k]);
      if (cap < 0)
        return -std::numeric_limits<double>::infinity(); // even the lightest choices do not fit
      double b = gain + m.start_suffix[k];
      for (const Segment& s : m.segments) {
        if (s.k < k)
          continue;
        if (s.bytes <= cap) {
          b += s.gain;
          cap -= s.bytes;
        } else {
          b += s.gain * (cap / s.bytes);
          break;
        }
      }
      best = std::min(best, b);
    }
    return best;
  }

  double bound(std::size_t k, double gain) const {
    double b = windowBound(k, gain);
    if (!points_.empty())
      b = std::min(b, memoryBound(k, gain));
    if (lag_ready_)
      b = std::min(b, lagrangeBound(k, gain));
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
      if (lag_ready_) // penalised gain: what the option is worth given what it uses
        return s.options[a].gain - lag_penalty_[k][a] > s.options[c].gain - lag_penalty_[k][c];
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
      for (auto& m : points_)
        m.decided += m.weight[k][oi];
      if (lag_ready_)
        lag_decided_ += lag_penalty_[k][oi];
      dfs(k + 1, gain + o.gain);
      if (lag_ready_)
        lag_decided_ -= lag_penalty_[k][oi];
      for (auto& m : points_)
        m.decided -= m.weight[k][oi];
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
  std::vector<MemPoint> points_;
  std::vector<std::int64_t> binding_;
  std::vector<int> group_windows_;
  bool lag_ready_ = false;
  double lag_const_ = 0, lag_decided_ = 0;
  std::vector<std::vector<double>> lag_penalty_;
  std::vector<double> lag_suffix_;
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
