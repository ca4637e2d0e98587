// The exact scheduler: greedy seed, then depth-first branch and bound per independent group.
#include "xalloc/scheduler/problem.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "xalloc/error.h"

namespace xalloc::scheduler {

namespace {

constexpr double kEps = 1e-9;

bool fits(double load, double capacity) {
  return load <= capacity + kEps * std::max(1.0, capacity);
}

// Live bytes per position with range adds and the maximum over all positions, O(log n) each.
class LiveTree {
public:
  explicit LiveTree(const std::vector<std::int64_t>& base)
      : n_(std::max<std::size_t>(base.size(), 1)), max_(4 * n_, 0), add_(4 * n_, 0) {
    if (!base.empty())
      build(1, 0, n_ - 1, base);
  }
  void add(const MemDelta& d) {
    if (d.bytes == 0 || n_ == 0)
      return;
    const auto last = static_cast<std::int64_t>(n_) - 1;
    const std::int64_t lo = std::clamp<std::int64_t>(d.first, 0, last);
    const std::int64_t hi = std::clamp<std::int64_t>(d.last, 0, last);
    if (lo > hi)
      return;
    add(1, 0, n_ - 1, static_cast<std::size_t>(lo), static_cast<std::size_t>(hi), d.bytes);
  }
  void add(const std::vector<MemDelta>& ds, int sign) {
    for (const auto& d : ds)
      add(MemDelta{d.first, d.last, sign * d.bytes});
  }
  std::int64_t peak() const { return max_[1]; }

private:
  void build(std::size_t node, std::size_t lo, std::size_t hi,
             const std::vector<std::int64_t>& base) {
    if (lo == hi) {
      max_[node] = base[lo];
      return;
    }
    const std::size_t mid = (lo + hi) / 2;
    build(2 * node, lo, mid, base);
    build(2 * node + 1, mid + 1, hi, base);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }
  void add(std::size_t node, std::size_t lo, std::size_t hi, std::size_t a, std::size_t b,
           std::int64_t v) {
    if (b < lo || hi < a)
      return;
    if (a <= lo && hi <= b) {
      max_[node] += v;
      add_[node] += v;
      return;
    }
    const std::size_t mid = (lo + hi) / 2;
    add(2 * node, lo, mid, a, b, v);
    add(2 * node + 1, mid + 1, hi, a, b, v);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
  }
  std::size_t n_;
  std::vector<std::int64_t> max_, add_;
};

// The parts of an option's deltas that lower memory: no choice lowers it by more than this.
std::vector<MemDelta> negativePart(const Site& s) {
  std::vector<MemDelta> out;
  for (const auto& o : s.options)
    for (const auto& d : o.memory)
      if (d.bytes < 0)
        out.push_back(d);
  return out;
}

struct Group {
  std::vector<int> sites;            // in branching order
  std::vector<int> windows;          // the windows they can use
  bool memory = false;               // its sites share positions where the budget can bind
  std::vector<std::int64_t> binding; // those positions, most over budget first
};

// Live bytes at each position if every site took, everywhere, the most memory any of its
// options takes there: where even this stays within the budget, memory cannot bind.
std::vector<std::int64_t> worstLive(const Problem& p) {
  const std::size_t n = p.base_live.size();
  std::vector<std::int64_t> diff(n + 1, 0);
  for (const Site& s : p.sites) {
    // This site's envelope: the largest of its options' (and 0) at each position.
    std::vector<std::int64_t> cuts;
    for (const auto& o : s.options)
      for (const auto& d : o.memory) {
        cuts.push_back(std::max<std::int64_t>(d.first, 0));
        cuts.push_back(std::min<std::int64_t>(d.last + 1, static_cast<std::int64_t>(n)));
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const std::int64_t t = cuts[c];
      std::int64_t env = 0;
      for (const auto& o : s.options) {
        std::int64_t v = 0;
        for (const auto& d : o.memory)
          if (d.first <= t && t <= d.last)
            v += d.bytes;
        env = std::max(env, v);
      }
      diff[static_cast<std::size_t>(t)] += env;
      diff[static_cast<std::size_t>(cuts[c + 1])] -= env;
    }
  }
  std::vector<std::int64_t> out(n);
  std::int64_t acc = 0;
  for (std::size_t t = 0; t < n; ++t)
    out[t] = p.base_live[t] + (acc += diff[t]);
  return out;
}

// Sites linked through shared windows form one group; so do sites whose memory meets at a
// position where the budget can bind. Everything else is independent.
std::vector<Group> groupsOf(const Problem& p) {
  const int nw = static_cast<int>(p.window_capacity.size());
  const int ns = static_cast<int>(p.sites.size());
  std::vector<int> parent(static_cast<std::size_t>(nw + ns));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x)
      x = parent[static_cast<std::size_t>(x)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    return x;
  };
  auto unite = [&](int a, int b) {
    parent[static_cast<std::size_t>(find(a))] = find(b);
  };
  for (int i = 0; i < ns; ++i)
    for (const auto& o : p.sites[static_cast<std::size_t>(i)].options)
      if (o.window >= 0)
        unite(nw + i, o.window);
  // Runs of consecutive positions where the budget can bind; a site joins every run its
  // memory touches, so two sites compete for memory only through a run they share.
  std::vector<std::pair<std::int64_t, std::int64_t>> runs; // [first, last]
  if (p.memory_budget) {
    const std::vector<std::int64_t> worst = worstLive(p);
    for (std::size_t t = 0; t < worst.size(); ++t)
      if (worst[t] > *p.memory_budget) {
        if (!runs.empty() && runs.back().second + 1 == static_cast<std::int64_t>(t))
          runs.back().second = static_cast<std::int64_t>(t);
        else
          runs.push_back({static_cast<std::int64_t>(t), static_cast<std::int64_t>(t)});
      }
  }
  const int run_base = static_cast<int>(parent.size());
  parent.resize(parent.size() + runs.size());
  std::iota(parent.begin() + run_base, parent.end(), run_base);
  for (int i = 0; i < ns && !runs.empty(); ++i)
    for (const auto& o : p.sites[static_cast<std::size_t>(i)].options)
      for (const auto& d : o.memory) {
        if (d.bytes == 0)
          continue;
        // The first run that ends at or after d.first; then every run that starts by d.last.
        auto it = std::lower_bound(runs.begin(), runs.end(), d.first,
                                   [](const auto& r, std::int64_t v) { return r.second < v; });
        for (; it != runs.end() && it->first <= d.last; ++it)
          unite(nw + i, run_base + static_cast<int>(it - runs.begin()));
      }
  std::vector<int> index(parent.size(), -1);
  std::vector<Group> groups;
  for (int i = 0; i < ns; ++i) {
    const int root = find(nw + i);
    auto& g = index[static_cast<std::size_t>(root)];
    if (g < 0) {
      g = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<std::size_t>(g)].sites.push_back(i);
  }
  for (int w = 0; w < nw; ++w) {
    const int g = index[static_cast<std::size_t>(find(w))];
    if (g >= 0)
      groups[static_cast<std::size_t>(g)].windows.push_back(w);
  }
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int g = index[static_cast<std::size_t>(find(run_base + static_cast<int>(r)))];
    if (g < 0)
      continue; // no site touches it: the base alone is over the budget there
    auto& grp = groups[static_cast<std::size_t>(g)];
    grp.memory = true;
    for (std::int64_t t = runs[r].first; t <= runs[r].second; ++t)
      grp.binding.push_back(t);
  }
  return groups;
}

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

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

} // namespace

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
  const bool seed_ok = std::isfinite(seed.gain);
  double bound = 0;
  for (const Group& g : groupsOf(p)) {
    SolveLimits group_limits = limits;
    group_limits.node_limit = std::max<std::int64_t>(0, limits.node_limit - out.nodes);
    Search search(p, g, group_limits, deadline);
    std::vector<int> start(search.order().size(), 0);
    double start_gain = -std::numeric_limits<double>::infinity();
    if (seed_ok) {
      start_gain = 0;
      for (std::size_t k = 0; k < start.size(); ++k) {
        const auto i = static_cast<std::size_t>(search.order()[k]);
        start[k] = seed.choice[i];
        start_gain += p.sites[i].options[static_cast<std::size_t>(start[k])].gain;
      }
    }
    search.run(start, start_gain);
    out.nodes += search.nodes();
    for (std::size_t k = 0; k < start.size(); ++k)
      out.choice[static_cast<std::size_t>(search.order()[k])] = search.bestChoice()[k];
    if (!search.finished()) {
      out.optimal = false;
      bound += std::max(search.bestGain(), search.openBound());
    } else {
      bound += search.bestGain();
    }
  }
  auto g = evaluate(p, out.choice);
  if (!g) // no feasible plan was found (only possible under a memory budget)
    throw InputError("xsched", "no plan fits the memory budget");
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

std::string toLpFormat(const Problem& p) {
  std::ostringstream lp;
  auto var = [](std::size_t i, std::size_t k) {
    return "x_" + std::to_string(i) + "_" + std::to_string(k);
  };
  lp << "Maximize\n obj:";
  bool any = false;
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k) {
      const double g = p.sites[i].options[k].gain;
      lp << (g < 0 ? " - " : " + ") << num(std::abs(g)) << " " << var(i, k);
      any = true;
    }
  if (!any)
    lp << " 0 dummy";
  lp << "\nSubject To\n";
  for (std::size_t i = 0; i < p.sites.size(); ++i) {
    lp << " one_" << i << ":";
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
      lp << " + " << var(i, k);
    lp << " = 1\n";
  }
  for (std::size_t w = 0; w < p.window_capacity.size(); ++w) {
    std::string terms;
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
        if (p.sites[i].options[k].window == static_cast<int>(w))
          terms += " + " + num(p.sites[i].options[k].load) + " " + var(i, k);
    if (!terms.empty())
      lp << " win_" << w << ":" << terms << " <= " << num(p.window_capacity[w]) << "\n";
  }
  if (p.memory_budget) {
    const std::size_t n = p.base_live.size();
    for (std::size_t t = 0; t < n; ++t) {
      std::string terms;
      for (std::size_t i = 0; i < p.sites.size(); ++i)
        for (std::size_t k = 0; k < p.sites[i].options.size(); ++k) {
          std::int64_t b = 0;
          for (const auto& d : p.sites[i].options[k].memory)
            if (d.first <= static_cast<std::int64_t>(t) && static_cast<std::int64_t>(t) <= d.last)
              b += d.bytes;
          if (b != 0)
            terms += (b > 0 ? " + " : " - ") + std::to_string(std::llabs(b)) + " " + var(i, k);
        }
      if (!terms.empty())
        lp << " mem_" << t << ":" << terms
           << " <= " << std::to_string(*p.memory_budget - p.base_live[t]) << "\n";
    }
  }
  lp << "Binary\n";
  for (std::size_t i = 0; i < p.sites.size(); ++i)
    for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
      lp << " " << var(i, k) << "\n";
  lp << "End\n";
  return lp.str();
}

} // namespace xalloc::scheduler
