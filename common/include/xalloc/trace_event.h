// Chrome / Perfetto trace events (the "traceEvents" JSON that chrome://tracing and
// ui.perfetto.dev open): what xprof --trace and xsched --trace both write.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace xalloc::trace {

/// Milliseconds as the trace's microseconds, rounded to the nanosecond.
double us(double ms);

/// A metadata event naming a process or a thread: what is "process_name" or "thread_name".
nlohmann::json meta(int pid, int tid, const char* what, const std::string& name);

/// A complete event ("ph": "X") from `start_ms` lasting `dur_ms`.
nlohmann::json slice(int pid, int tid, const std::string& name, double start_ms, double dur_ms,
                     nlohmann::json args);

/// The whole trace document, one line: {"displayTimeUnit":"ms","traceEvents":[...]}.
std::string document(nlohmann::json events);

} // namespace xalloc::trace
