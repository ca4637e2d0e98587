// findCpuIdleWindows: cpu-spare and host-gap windows from a timeline run.
#include "xalloc/profiler/idle_windows.h"

#include <algorithm>

namespace xalloc::profiler {

std::vector<formats::IdleEvent> findCpuIdleWindows(const std::vector<OpTiming>& timeline,
                                                   const std::vector<formats::Op>& ops, int cores,
                                                   double min_window_ms) {
  std::vector<formats::IdleEvent> out;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < timeline.size() && i < ops.size(); ++i)
    if (timeline[i].start_ms >= 0)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return timeline[a].start_ms < timeline[b].start_ms;
  });
  const double n = static_cast<double>(cores);
  std::int64_t next_id = 0;
  for (std::size_t k = 1; k + 1 < order.size(); ++k) {
    const std::size_t prev = order[k - 1], cur = order[k], next = order[k + 1];
    const double prev_end = timeline[prev].start_ms + timeline[prev].duration_ms;
    const double gap = timeline[cur].start_ms - prev_end;
    if (gap >= min_window_ms && n > 1) {
      formats::IdleEvent e;
      e.id = next_id++;
      e.after_op_id = static_cast<std::int64_t>(prev);
      e.before_op_id = static_cast<std::int64_t>(cur);
      e.start_ms = prev_end;
      e.duration_ms = gap;
      e.spare_cores = n - 1;
      e.kind = "host-gap";
      out.push_back(e);
    }
    const formats::Op& op = ops[cur];
    const double spare = n * (1.0 - op.utilization);
    if (op.duration_ms >= min_window_ms && spare >= 0.25) {
      formats::IdleEvent e;
      e.id = next_id++;
      e.after_op_id = static_cast<std::int64_t>(prev);
      e.before_op_id = static_cast<std::int64_t>(next);
      e.start_ms = timeline[cur].start_ms;
      e.duration_ms = op.duration_ms;
      e.spare_cores = spare;
      e.kind = "cpu-spare";
      out.push_back(e);
    }
  }
  return out;
}

} // namespace xalloc::profiler
