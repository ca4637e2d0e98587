// Seeded scheduling problems shaped like real models (tests and benchmarks), and a replay
// simulator that executes a plan with the conversion costs it actually meets.
#pragma once

#include <cstdint>
#include <vector>

#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler {

struct InstanceShape {
  int sites = 20;
  int windows = 10;
  int positions = 200;         // ops
  bool memory_budget = false;  // a budget between the base peak and the unconstrained plan's
  bool removes = true;         // some sites are existing conversions that may be removed
  double capacity_scale = 1.0; // <1: tighter windows
};

/// A problem on a timeline of `positions` ops: windows at random places with random capacities;
/// each site has a producer, a first consumer a few ops later, a sync option, async options for
/// the windows in between, and sometimes a remove option; copies live until a last use.
Problem randomProblem(std::uint64_t seed, const InstanceShape& shape);

struct Replay {
  double worst_overrun = 0;    // max over windows of (async work - duration) / duration, >= 0
  std::int64_t peak_bytes = 0; // computed from the plan's allocations by an event sweep
};

/// Runs `choice` with each site's conversion taking `scale[i]` times its predicted time.
/// `safety` is the factor the capacities were scaled by (a window lasts capacity / safety).
Replay replay(const Problem& p, const std::vector<int>& choice, const std::vector<double>& scale,
              double safety);

} // namespace xalloc::scheduler
