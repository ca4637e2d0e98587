// The planner's shared internals: footprints, and best-gap placement over an index of the
// tensors alive together (placement.cpp). Used by the heuristics and the verifier.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "xalloc/memplan/planner.h"

namespace xalloc::memplan::detail {

std::int64_t alignmentOf(const TensorSpec& t, const PlanOptions& o);

/// Bytes a tensor occupies in the workspace: its size rounded up to its alignment.
std::int64_t footprint(const TensorSpec& t, const PlanOptions& o);

/// Places tensors in `order` at the smallest gap (among tensors overlapping in time) that holds
/// them, or above all of them (`first_fit`: the lowest gap that holds them). Pinned tensors are
/// placed first at their offsets.
Plan placeBestGap(const std::vector<TensorSpec>& ts, const std::vector<int>& order,
                  const PlanOptions& o, const std::string& name, bool first_fit = false);

// Compressed time: the distinct first_op values and last_op + 1 values, so that the set of live
// tensors is constant between consecutive points.
struct TimeAxis {
  std::vector<std::int64_t> points;
  explicit TimeAxis(const std::vector<TensorSpec>& ts) {
    points.reserve(ts.size() * 2);
    for (const auto& t : ts) {
      points.push_back(t.first_op);
      points.push_back(t.last_op + 1);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
  }
  std::size_t size() const { return points.size(); }
  // Index of the interval [points[i], points[i+1]) holding time t.
  std::size_t at(std::int64_t t) const {
    return static_cast<std::size_t>(std::upper_bound(points.begin(), points.end(), t) -
                                    points.begin()) -
           1;
  }
};

/// 0, 1, ..., n - 1.
std::vector<int> identity(std::size_t n);

} // namespace xalloc::memplan::detail
