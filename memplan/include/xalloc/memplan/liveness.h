// Liveness of buffers over an op sequence: the lower bound on memory, max over time of the sum of
// live bytes. Plain C++ without libtorch; the scheduler and the static planner use it.
#pragma once

#include <cstdint>
#include <vector>

namespace xalloc::memplan {

/// A buffer of `bytes` alive from op `first` through op `last`, inclusive.
struct Interval {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t bytes = 0;
};

/// Maximum over time of the bytes alive at once. O(n log n).
std::int64_t peakLiveBytes(const std::vector<Interval>& intervals);

} // namespace xalloc::memplan
