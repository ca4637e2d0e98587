// randomProblem and replay: seeded instances for tests and benchmarks, and a plan executor.
#include "xalloc/scheduler/instances.h"

#include <algorithm>
#include <map>
#include <random>

namespace xalloc::scheduler {

Problem randomProblem(std::uint64_t seed, const InstanceShape& shape) {
  std::mt19937_64 rng(seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, std::max(lo, hi))(rng);
  };
  const std::int64_t n = std::max(shape.positions, 4);
  Problem p;
  // Base live memory: a random walk of activations, 1..64 MiB.
  p.base_live.resize(static_cast<std::size_t>(n));
  std::int64_t live = 8 << 20;
  for (auto& b : p.base_live) {
    live = std::clamp<std::int64_t>(live + pick(-1, 1) * (256 << 10), 1 << 20, 64 << 20);
    b = live;
  }
  // Windows: (after, before) pairs at random places, a few ops wide.
  struct W {
    std::int64_t after, before;
  };
  std::vector<W> windows;
  for (int w = 0; w < shape.windows; ++w) {
    const std::int64_t after = pick(0, n - 3);
    windows.push_back({after, std::min(n - 1, after + pick(1, 3))});
    p.window_capacity.push_back(uni(0.05, 1.0) * shape.capacity_scale);
  }
  for (int i = 0; i < shape.sites; ++i) {
    Site s;
    s.options.push_back({});
    const std::int64_t producer = pick(0, n - 2);
    const std::int64_t first = std::min(n - 1, producer + 1 + pick(0, 1) * pick(0, 12));
    const std::int64_t last = std::min(n - 1, first + pick(0, 40));
    const std::int64_t bytes = pick(1, 64) << 16;
    const double cost = uni(0.01, 0.6);
    const double saving = cost * uni(0.2, 3.0);
    if (shape.removes && pick(0, 5) == 0) {
      // An existing conversion: removing it frees its copy and may cost its consumers time.
      s.options.push_back({3, -1, cost - saving * uni(0.0, 1.2), 0, {{first, last, -bytes}}});
      for (std::int64_t t = first; t <= last; ++t) // the copy it would free is live today
        p.base_live[static_cast<std::size_t>(t)] += bytes;
    } else {
      s.options.push_back({1, -1, saving - cost, 0, {{first, last, bytes}}});
      for (std::size_t w = 0; w < windows.size(); ++w)
        if (windows[w].after >= producer && windows[w].before <= first &&
            cost <= p.window_capacity[w])
          s.options.push_back(
              {2, static_cast<int>(w), saving, cost, {{windows[w].after + 1, last, bytes}}});
    }
    p.sites.push_back(std::move(s));
  }
  if (shape.memory_budget) {
    std::vector<int> best(p.sites.size(), 0);
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      for (std::size_t k = 0; k < p.sites[i].options.size(); ++k)
        if (p.sites[i].options[k].gain > p.sites[i].options[static_cast<std::size_t>(best[i])].gain)
          best[i] = static_cast<int>(k);
    const std::int64_t lo = planPeak(p, std::vector<int>(p.sites.size(), 0));
    const std::int64_t hi = planPeak(p, best);
    p.memory_budget = lo + (hi > lo ? pick(0, hi - lo) : 0);
  }
  return p;
}

Replay replay(const Problem& p, const std::vector<int>& choice, const std::vector<double>& scale,
              double safety) {
  Replay r;
  // The side worker runs each window's conversions back to back from the window's start.
  std::vector<double> work(p.window_capacity.size(), 0.0);
  std::map<std::int64_t, std::int64_t> events; // position -> bytes allocated (+) or freed (-)
  for (std::int64_t t = 0; t < static_cast<std::int64_t>(p.base_live.size()); ++t) {
    const std::int64_t prev = t ? p.base_live[static_cast<std::size_t>(t - 1)] : 0;
    events[t] += p.base_live[static_cast<std::size_t>(t)] - prev;
  }
  for (std::size_t i = 0; i < p.sites.size(); ++i) {
    const Option& o = p.sites[i].options[static_cast<std::size_t>(choice[i])];
    if (o.window >= 0)
      work[static_cast<std::size_t>(o.window)] += o.load * scale[i];
    for (const auto& d : o.memory) {
      events[d.first] += d.bytes;
      events[d.last + 1] -= d.bytes;
    }
  }
  for (std::size_t w = 0; w < work.size(); ++w) {
    const double duration = p.window_capacity[w] / safety;
    if (duration > 0)
      r.worst_overrun = std::max(r.worst_overrun, (work[w] - duration) / duration);
  }
  std::int64_t live = 0;
  for (const auto& [t, b] : events) {
    live += b;
    if (t < static_cast<std::int64_t>(p.base_live.size()))
      r.peak_bytes = std::max(r.peak_bytes, live);
  }
  return r;
}

} // namespace xalloc::scheduler
