// The solver's parts, shared by its translation units (not installed): the live-memory tree,
// the decomposition into independent groups, and the branch-and-bound search of one group.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler::detail {

inline constexpr double kEps = 1e-9;

inline bool fits(double load, double capacity) {
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
inline std::vector<MemDelta> negativePart(const Site& s) {
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
  std::vector<std::int64_t> binding; // those positions
};

/// Sites linked through shared windows form one group; so do sites whose memory meets at a
/// position where the budget can bind. Everything else is independent.
std::vector<Group> groupsOf(const Problem& p);

struct GroupResult {
  std::vector<int> order;  // the group's sites in branching order
  std::vector<int> choice; // best option per site, in that order
  double gain = 0;         // of `choice`
  double open_bound = 0;   // when unfinished: the best bound over the open nodes
  bool finished = true;
  std::int64_t nodes = 0;
};

/// Depth-first branch and bound over one group, from `seed` (a choice per site of the whole
/// problem; -infinity gain when it is infeasible).
GroupResult searchGroup(const Problem& p, const Group& g, const SolveLimits& limits,
                        std::chrono::steady_clock::time_point deadline,
                        const std::vector<int>& seed, bool seed_feasible);

} // namespace xalloc::scheduler::detail
