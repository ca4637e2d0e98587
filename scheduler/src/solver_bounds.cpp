// The solver's memory and Lagrangian bounds (solver_bounds.h).
#include "solver_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace xalloc::scheduler::detail {

void MemoryBound::prepare(const Problem& p, const std::vector<int>& order_,
                          const std::vector<std::int64_t>& binding) {
  p_ = &p;
  points_.clear();
  constexpr std::size_t kPoints = 8;
  const std::size_t n = order_.size();
  // Live bytes if every site took its best option: where this is furthest over the budget.
  std::vector<std::int64_t> diff(p_->base_live.size() + 1, 0);
  for (int i : order_) {
    const Site& s = p_->sites[static_cast<std::size_t>(i)];
    std::size_t best = 0;
    for (std::size_t o = 0; o < s.options.size(); ++o)
      if (s.options[o].gain > s.options[best].gain)
        best = o;
    for (const auto& d : s.options[best].memory) {
      const auto lo = static_cast<std::size_t>(
          std::clamp<std::int64_t>(d.first, 0, static_cast<std::int64_t>(p_->base_live.size())));
      const auto hi = static_cast<std::size_t>(
          std::clamp<std::int64_t>(d.last + 1, 0, static_cast<std::int64_t>(p_->base_live.size())));
      if (lo < hi) {
        diff[lo] += d.bytes;
        diff[hi] -= d.bytes;
      }
    }
  }
  std::vector<std::int64_t> relaxed(p_->base_live.size());
  std::int64_t acc = 0;
  for (std::size_t t = 0; t < relaxed.size(); ++t)
    relaxed[t] = p_->base_live[t] + (acc += diff[t]);
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
      const Site& s = p_->sites[static_cast<std::size_t>(order_[k])];
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
    std::stable_sort(m.segments.begin(), m.segments.end(), [](const Segment& a, const Segment& b) {
      return a.gain * b.bytes > b.gain * a.bytes;
    });
    points_.push_back(std::move(m));
  }
}

double MemoryBound::at(std::size_t k, double gain) const {
  double best = std::numeric_limits<double>::infinity();
  for (const MemPoint& m : points_) {
    double cap =
        static_cast<double>(*p_->memory_budget - p_->base_live[static_cast<std::size_t>(m.t)] -
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

void MemoryBound::decide(std::size_t k, std::size_t o, int sign) {
  for (auto& m : points_)
    m.decided += sign * m.weight[k][o];
}

void LagrangeBound::prepare(const Problem& p_, const std::vector<int>& order_,
                            const std::vector<std::int64_t>& binding_,
                            const std::vector<int>& group_windows_, double incumbent) {
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
      pen +=
          mu[static_cast<std::size_t>(win_index[static_cast<std::size_t>(opt.window)])] * opt.load;
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
  const_ = 0;
  for (std::size_t i = 0; i < nt; ++i)
    const_ += lambda[i] * room[i];
  for (std::size_t w = 0; w < nw; ++w)
    const_ += mu[w] * cap[w];
  penalty_.assign(n, {});
  suffix_.assign(n + 1, 0.0);
  for (std::size_t k = n; k-- > 0;) {
    const Site& s = p_.sites[static_cast<std::size_t>(order_[k])];
    double best_v = -std::numeric_limits<double>::infinity();
    for (std::size_t o = 0; o < s.options.size(); ++o) {
      penalty_[k].push_back(penalty(k, o));
      best_v = std::max(best_v, s.options[o].gain - penalty_[k].back());
    }
    suffix_[k] = suffix_[k + 1] + best_v;
  }
  ready_ = true;
}

} // namespace xalloc::scheduler::detail
