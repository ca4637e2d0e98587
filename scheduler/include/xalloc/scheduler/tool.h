// xsched as a function: options in a plain struct, an exit code out (see main.cpp for the flags).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xalloc::scheduler {

struct XschedOptions {
  std::string profile; // profile.json; "" = take it from the stdin stream
  std::string cost;    // cost.json; "" = take it from the stdin stream
  /// Profiles of the same model at other input shapes: region layouts must hold at each.
  std::vector<std::string> shape_profiles;
  std::string output; // schedule.json, "-", or "" (stream mode)
  bool explain = false;
  double min_gain_ms = 0.001;
  double z = 2.0;
  double min_relative_gain = 0.05;
  double min_region_gain = 0.02;
  double min_model_gain = 0.001;
  std::optional<std::string> memory_budget; // "512M", "2G", "1048576"
  double window_safety = 0.9;
  int async_workers = 1;
  bool no_async = false;
  std::string form = "portable"; // "portable" or "fast": the rewrite the plan is for
  double async_overhead_ms = 0.02;
  std::int64_t node_limit = 2'000'000;
  double time_limit_ms = 1000;
  std::string trace;               // Chrome/Perfetto trace of the plan ("" = none)
  bool foreign_cost = false;       // accept a cost model fitted on another model's profile
  std::optional<double> tolerance; // --tolerance E (default formats::kDefaultTolerance)
  bool exact = false;              // --exact: bit-identical outputs only
};

int runXsched(const XschedOptions& options);

/// `xsched memplan`: a static memory plan for a tensor list or a profile.
struct MemplanOptions {
  std::string input;  // {"tensors":[...]} or profile.json; "" or "-" = stdin
  std::string output; // "" or "-" = stdout
  std::int64_t alignment = 64;
  std::optional<std::string> budget; // "512M": exit 2 with the numbers when the plan needs more
  int search_iterations = -1;
};

int runMemplan(const MemplanOptions& options);

} // namespace xalloc::scheduler
