// writeChromeTrace: Chrome trace-event JSON of ops, spare-capacity windows and measurements.
#include "xalloc/profiler/trace.h"

#include <nlohmann/json.hpp>

#include "xalloc/io.h"
#include "xalloc/trace_event.h"

namespace xalloc::profiler {

using nlohmann::json;

using trace::meta;
using trace::slice;

void writeChromeTrace(const std::string& path, const formats::Profile& p,
                      const std::vector<OpTiming>& timeline) {
  json events = json::array();
  events.push_back(meta(1, 0, "process_name", "model " + p.model.path));
  events.push_back(meta(1, 1, "thread_name", "ops (one run)"));
  events.push_back(meta(1, 2, "thread_name", "spare capacity"));
  events.push_back(meta(2, 0, "process_name", "measurements"));
  events.push_back(meta(2, 1, "thread_name", "conversions (median each)"));
  events.push_back(meta(2, 2, "thread_name", "consumer re-runs (as-is, then other layout)"));
  for (const auto& op : p.ops) {
    const auto i = static_cast<std::size_t>(op.id);
    if (i >= timeline.size() || timeline[i].start_ms < 0)
      continue;
    events.push_back(slice(1, 1, op.kind, timeline[i].start_ms, timeline[i].duration_ms,
                           {{"op", op.id},
                            {"source", op.source.file + ":" + std::to_string(op.source.line)},
                            {"expr", op.anchor.expr},
                            {"scope", op.scope},
                            {"median_ms", op.duration_ms},
                            {"utilization", op.utilization}}));
  }
  for (const auto& w : p.gpu_idle_events)
    events.push_back(slice(1, 2,
                           w.kind + " " + std::to_string(w.spare_cores).substr(0, 4) + " cores",
                           w.start_ms, w.duration_ms,
                           {{"window", w.id},
                            {"after_op", w.after_op_id},
                            {"before_op", w.before_op_id},
                            {"spare_cores", w.spare_cores}}));
  double t = 0;
  for (const auto& c : p.conversion_cost_table) {
    events.push_back(slice(2, 1, c.key(), t, c.median_ms,
                           {{"median_ms", c.median_ms},
                            {"spread_ms", c.spread_ms},
                            {"samples", c.samples_ms.size()},
                            {"source", c.source},
                            {"noisy", c.noisy}}));
    t += c.median_ms;
  }
  t = 0;
  for (const auto& r : p.records)
    for (const auto& c : r.consumers) {
      if (!c.measured)
        continue;
      const formats::Op* op = p.findOp(c.op_id);
      const std::string name = (op ? op->kind : "op") + " reading %" + r.name;
      const double other = c.time_contiguous_ms.value_or(c.time_noncontiguous_ms.value_or(0));
      events.push_back(slice(2, 2, name + " (as-is)", t, c.time_as_is_ms,
                             {{"layout", r.layout.key()}, {"ms", c.time_as_is_ms}}));
      t += c.time_as_is_ms;
      events.push_back(slice(2, 2,
                             name + (c.time_contiguous_ms ? " (contiguous)" : " (non-contiguous)"),
                             t, other, {{"ms", other}, {"identical_output", c.identical_output}}));
      t += other;
    }
  writeFileAtomic(path, trace::document(std::move(events)));
}

} // namespace xalloc::profiler
