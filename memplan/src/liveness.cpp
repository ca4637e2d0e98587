// peakLiveBytes: sweep line over allocation and free events.
#include "xalloc/memplan/liveness.h"

#include <algorithm>
#include <utility>

#include "xalloc/error.h"

namespace xalloc::memplan {

std::int64_t peakLiveBytes(const std::vector<Interval>& intervals) {
  // (time, delta): a buffer is freed at last + 1, and frees at a time sort before allocations.
  std::vector<std::pair<std::int64_t, std::int64_t>> events;
  events.reserve(intervals.size() * 2);
  for (const auto& iv : intervals) {
    XALLOC_EXPECTS(iv.last >= iv.first, "interval ends before it starts");
    XALLOC_EXPECTS(iv.bytes >= 0, "negative size");
    events.emplace_back(iv.first, iv.bytes);
    events.emplace_back(iv.last + 1, -iv.bytes);
  }
  std::sort(events.begin(), events.end());
  std::int64_t live = 0;
  std::int64_t peak = 0;
  for (const auto& [t, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace xalloc::memplan
