// Chrome trace-event helpers (xalloc/trace_event.h).
#include "xalloc/trace_event.h"

#include <cmath>

namespace xalloc::trace {

double us(double ms) {
  return std::round(ms * 1e6) / 1000;
}

nlohmann::json meta(int pid, int tid, const char* what, const std::string& name) {
  return {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", what}, {"args", {{"name", name}}}};
}

nlohmann::json slice(int pid, int tid, const std::string& name, double start_ms, double dur_ms,
                     nlohmann::json args) {
  return {{"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"name", name},
          {"ts", us(start_ms)},
          {"dur", us(dur_ms)},
          {"args", std::move(args)}};
}

std::string document(nlohmann::json events) {
  const nlohmann::json doc{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

} // namespace xalloc::trace
