// planTrace: the schedule as a Chrome/Perfetto trace: compute ops, idle windows, and the
// conversions the plan adds (async ones on a side-worker track, sync ones before their consumer).
#include <map>

#include <nlohmann/json.hpp>

#include "xalloc/scheduler/decide.h"
#include "xalloc/trace_event.h"

namespace xalloc::scheduler {

using nlohmann::json;

namespace {
json meta(int tid, const char* what, const std::string& name) {
  return trace::meta(1, tid, what, name);
}
json slice(int tid, const std::string& name, double start_ms, double dur_ms, json args) {
  return trace::slice(1, tid, name, start_ms, dur_ms, std::move(args));
}
} // namespace

std::string planTraceJson(const formats::Schedule& s) {
  json events = json::array();
  events.push_back(meta(0, "process_name", "plan for " + s.model.path));
  events.push_back(meta(1, "thread_name", "compute ops"));
  events.push_back(meta(2, "thread_name", "idle windows"));
  events.push_back(meta(3, "thread_name", "side worker: async conversions"));
  events.push_back(meta(4, "thread_name", "sync conversions (critical path)"));
  std::map<std::int64_t, const formats::Op*> ops;
  for (const auto& op : s.ops) {
    ops[op.id] = &op;
    events.push_back(slice(1, op.kind, op.start_ms, op.duration_ms,
                           {{"op", op.id}, {"expr", op.anchor.expr}, {"ms", op.duration_ms}}));
  }
  std::map<std::int64_t, double> window_fill; // ms of async work placed so far per window
  for (const auto& w : s.gpu_idle_events)
    events.push_back(slice(2, w.kind + " window " + std::to_string(w.id), w.start_ms, w.duration_ms,
                           {{"window", w.id},
                            {"after_op", w.after_op_id},
                            {"before_op", w.before_op_id},
                            {"spare_cores", w.spare_cores}}));
  for (const auto& d : s.decisions) {
    const std::string name = "%" + d.value_name + " " + d.layout.key();
    json args{{"value", d.value_id},
              {"cost_ms", d.predicted_cost_ms},
              {"saving_ms", d.predicted_saving_ms},
              {"reason", d.reason}};
    if (d.action == formats::Action::Async && d.window_id) {
      for (const auto& w : s.gpu_idle_events)
        if (w.id == *d.window_id) {
          double& fill = window_fill[w.id];
          events.push_back(slice(3, name, w.start_ms + fill, d.predicted_cost_ms, args));
          fill += d.predicted_cost_ms;
        }
    } else if (d.action == formats::Action::Sync && !d.consumers.empty()) {
      std::int64_t c1 = d.consumers.front();
      for (auto c : d.consumers)
        c1 = std::min(c1, c);
      const double at = ops.count(c1) ? ops[c1]->start_ms : 0;
      events.push_back(slice(4, name, at - d.predicted_cost_ms, d.predicted_cost_ms, args));
    }
  }
  return trace::document(std::move(events));
}

} // namespace xalloc::scheduler
