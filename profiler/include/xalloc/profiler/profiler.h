// xprof's engine for TorchScript models: load, inline a copy of the method's graph, run it node
// by node, and measure what x-allocator's decisions rest on (see profiler/README.md).
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/profile.h"

namespace xalloc::profiler {

struct ProfileOptions {
  std::string model;
  std::string method = "forward";
  std::vector<formats::InputSpec> inputs; // empty: the model's own example inputs
  std::string input_file;                 // or tensors saved by torch.save (a tensor, tuple, list)
  int iterations = 10;                    // timed runs of the whole graph
  int warmup = 3;                         // untimed runs before any measurement
  int repeats = 15; // repetitions of each isolated measurement (conversions, consumers)
  int threads = 0;  // intra-op threads; 0 keeps libtorch's default
  std::int64_t seed = 0;
  bool measure_consumers = true;
  // Layout regions of the model frozen, each timed in every candidate layout (regions.h).
  bool measure_regions = true;
  // Profile the model frozen first, as xrewrite --freeze writes it: weights are constants (a
  // weight's conversion is free), batch norms folded.
  bool freeze = false;
  // The synthetic conversion sweep.
  bool sweep = false;
  int sweep_count = 320;
  std::int64_t sweep_max_bytes = 0; // 0: defaultSweepMaxBytes()
  // The timing database.
  bool use_db = true;
  std::string db_path; // "": TimingDb::defaultPath()
  // Output beside the profile.
  std::string trace_path;      // a Chrome trace, "" for none
  bool progress = false;       // a progress bar on stderr (only when it is a terminal)
  double min_window_ms = 0.01; // shorter idle windows are not reported
  /// Seconds the measurements may take, all of them (0: no limit). The conversions and consumer
  /// re-runs stop at 40% of it, the layout regions (largest first) at the whole; what is not
  /// timed then is left as it is, with a note saying so. A later run reuses what the timing
  /// database holds and times more.
  double budget_s = 60;
  /// Milliseconds spent before profiling began that the budget counts too: xprof gives its
  /// process's age (loading libtorch and the tools' libraries), so that the budget is what the
  /// user waits for.
  double spent_before_ms = 0;
};

/// Profiles a TorchScript model. Throws InputError for bad input (missing model, bad inputs,
/// unsupported ops, a model that fails); nothing is written then.
formats::Profile profileModel(const ProfileOptions& options);

} // namespace xalloc::profiler
