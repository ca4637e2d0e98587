// The solver's bounds on what a group's undecided sites can still gain, beside the window bound
// the search keeps itself (solver_search.cpp): the memory bound (an LP relaxation of the budget at
// the positions where it binds hardest) and the Lagrangian bound (the budget at every binding
// position and every window's capacity relaxed with multipliers found at the root). Both are
// O(points) or O(1) per node: suffix sums, plus what the decided sites use, kept up to date by
// decide/undo as the search branches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler::detail {

/// At a few positions where the budget binds hardest, the sites compete for what is left of the
/// budget there; the LP relaxation of that multiple-choice knapsack (upper convex hull of each
/// site's options, segments taken by decreasing gain per byte) bounds what the undecided sites
/// can still gain.
class MemoryBound {
public:
  /// `order`: the group's sites in branching order; `binding`: the positions to consider.
  void prepare(const Problem& p, const std::vector<int>& order,
               const std::vector<std::int64_t>& binding);
  bool empty() const { return points_.empty(); }
  /// The bound with sites [0, k) decided for `gain`; -inf when even the lightest choices of the
  /// rest do not fit.
  double at(std::size_t k, double gain) const;
  /// Site k took (+1) or gave back (-1) option o.
  void decide(std::size_t k, std::size_t o, int sign);

private:
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

  const Problem* p_ = nullptr;
  std::vector<MemPoint> points_;
};

/// Lagrangian relaxation of the budget at every binding position and of every window's
/// capacity: with multipliers lambda (per byte at a position) and mu (per ms of a window), each
/// site picks the option with the best penalised gain, and
///   gain <= sum_k max_o (g_ko - lambda.w_ko - mu.load_ko) + lambda.(budget - base) + mu.cap
/// for every plan. Subgradient steps at the root find good multipliers; inside the tree they
/// stay fixed, and they order the options to try.
class LagrangeBound {
public:
  void prepare(const Problem& p, const std::vector<int>& order,
               const std::vector<std::int64_t>& binding, const std::vector<int>& windows,
               double incumbent);
  bool ready() const { return ready_; }
  double at(std::size_t k, double gain) const { return gain + suffix_[k] + const_ - decided_; }
  /// What option o of site k uses, priced by the multipliers.
  double penalty(std::size_t k, std::size_t o) const { return penalty_[k][o]; }
  void decide(std::size_t k, std::size_t o, int sign) { decided_ += sign * penalty_[k][o]; }

private:
  bool ready_ = false;
  double const_ = 0, decided_ = 0;
  std::vector<std::vector<double>> penalty_;
  std::vector<double> suffix_;
};

} // namespace xalloc::scheduler::detail
