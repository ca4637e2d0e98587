// The optimization problem xsched solves, built from the per-site candidates: each site's
// options (none, sync or remove, async in each window it fits), the windows' capacities and the
// memory the model keeps live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/scheduler/problem.h"

#include "candidates.h"
#include "memory_internal.h"

namespace xalloc::scheduler {

struct Built {
  Problem problem;
  std::vector<std::int64_t> window_ids; // problem window index -> idle event id
  std::vector<std::size_t> site_of;     // candidate -> problem site
};

/// One site per edit group (`groups`, editGroups'); async options only in a plan for the fast
/// form. `st`: the profile's storages (storagesOf), computed once by the caller.
Built buildProblem(const formats::Profile& p, const Storages& st,
                   const std::vector<Candidate>& cands,
                   const std::vector<std::vector<std::size_t>>& groups, const SchedOptions& o);

/// The least peak any plan reaches: no conversions, and each removal that lowers the peak.
std::int64_t smallestFeasiblePeak(const formats::Profile& p, const Storages& st,
                                  const std::vector<Candidate>& cands,
                                  const std::vector<std::vector<std::size_t>>& groups);

} // namespace xalloc::scheduler
