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
  int iterations = 10;                    // timed runs of the whole graph
  int warmup = 3;                         // untimed runs before any measurement
  int repeats = 15; // repetitions of each isolated measurement (conversions, consumers)
  int threads = 0;  // intra-op threads; 0 keeps libtorch's default
  std::int64_t seed = 0;
  bool measure_consumers = true;
};

/// Profiles a TorchScript model. Throws InputError for bad input (missing model, bad inputs,
/// unsupported ops).
formats::Profile profileModel(const ProfileOptions& options);

} // namespace xalloc::profiler
