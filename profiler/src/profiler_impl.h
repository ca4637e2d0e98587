// xprof's engine for a TorchScript model (profileModel), as one class whose work is split over
// four files: profiler.cpp (the run, its inputs), profile_cache.cpp (the timing database: its
// scope, finished profiles, the launcher's answer, timelines), op_timing.cpp (running the graph
// and timing each op) and records.cpp (value records, conversions, the sweep, consumers).
// Internal to the profiler.
#pragma once

#include "xalloc/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/version.h>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/consumers.h"
#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/idle_windows.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/progress.h"
#include "xalloc/profiler/signature.h"
#include "xalloc/profiler/sweep.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/profiler/trace.h"
#include "xalloc/torch_compat.h"
#include "xalloc/tspass/constants.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/layer_noise.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/mutation.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/specialize.h"
#include "xalloc/tspass/threads.h"
#include "xalloc/version.h"

namespace xalloc::profiler::detail {

using formats::Record;
using torch::jit::Node;
using torch::jit::Value;

// The version of how xprof measures: raised whenever a change makes stored measurements
// incomparable with new ones, so that the database never mixes the two.
// 4: ops numbered on the model passed through the serializer (tspass::canonicalize).
// 5: a frozen model numbered after its specialization to its inputs' ranks (tspass/specialize.h).
inline constexpr int kMeasureMethod = 5;
// The version of what xprof concludes from its measurements (records, safety judgements):
// raised when the same measurements would make a different profile, so that a finished
// profile stored before is not handed back. 2: tensor attributes alias by storage.
// 3: values computed from constants alone have origin "constant". 4: module_storage.
// 5: ops say how many times they ran (runs). 6: attributes the graph assigns hold what it
// assigns them (tspass::MutationInfo); a loop's values are those of its heaviest trip.
// 7: conversion costs say what a fresh output costs (allocation_ms); loop values say what their
// trips add up to (runs_by_bytes).
// 8: layout regions of the frozen model, each candidate layout timed.
// 9: conversions to channels-last measured; producers fused with their conversion timed.
// 10: consumers whose output changes layout are followed downstream.
// 11: output errors element by element (tspass::maxRelativeError); packed and blocked regions
// keep NaN and take their own scratchpads.
// 12: regions run through concatenations; a layout that would repeat another is not measured.
// 13: packed regions pool without indices (xalloc::max_pool2d); fast-form regions run in the
// activation arena.
// 14: self-attention blocks (aten::_native_multi_head_attention) are regions of their own.
// 15: freezing folds batch norms whose input's rank check read the convolution before them.
// 16: a region entered by a feature list the fast form keeps channels-last (DenseNet's) has its
// fast-form channels-last candidates timed with that entry channels-last.
// 17: packed convolutions and linears run SiLU as their own pass, not oneDNN's post-op (faster:
// timings of regions with SiLU changed).
// 18: a frozen model is specialized to its inputs' ranks (tspass/specialize.h) before numbering:
// dict items forwarded, rank branches inlined, so regions run through a segmenter's head.
// 19: a region's rounding error also moves each layer's output one ulp (tspass/layer_noise.h).
// 20: a region names the regions that read its exits (feeds: xsched weighs shared borders).
// 21: a candidate says in how many paired rounds it was the faster (rounds, faster_rounds).
inline constexpr int kProfileAnalysis = 21;
// Passes over the sweep's layouts (conversion_cost.h: measureInPasses).
inline constexpr int kSweepPasses = 3;

class Profiler {
public:
  explicit Profiler(const ProfileOptions& o) : o_(o), progress_(o.progress) {}

  formats::Profile run();

private:
  void prepareInputs(tspass::LoadedModel& model);
  /// The rank of each input after self (prepareInputs's), as regions and specialization read them.
  std::vector<std::optional<int>> inputRanks() const {
    return tspass::inputRanks({inputs_.begin() + 1, inputs_.end()});
  }

  // The device fingerprint scopes the database: measurements from another CPU, core count,
  // thread count or cache size never count here, nor those taken on another BLAS (Debian's
  // reference BLAS and OpenBLAS differ ten-fold in a linear, and in its output bits).
  void openDb();

  // A finished profile is reused whole when the model's bytes, the inputs and every setting
  // that shapes the profile are the same (device and library scope the database as always):
  // the same graph on the same inputs takes the same path and sees the same layouts, so the
  // capture run and the correctness checks would give the same answers. A trace needs the
  // timeline run, so --trace always profiles.
  std::string profileKey() const;

  std::optional<formats::Profile> cachedProfile(const std::string& key);

  // Run by xprof's launcher: tell it where this invocation's finished profile is.
  void answerLauncher(const std::string& memo_key);

  double cachedBandwidth();

  // One run of the whole graph; a failure of the model itself becomes a clear InputError.
  void runModel(const GraphRunner::Options& options, GraphRunner::Trace* trace);

  std::vector<c10::IValue> inputsOf(const Node* n, const GraphRunner::Trace& t) const;

  // Per-op median wall time over `iterations` runs and utilization from process CPU time, both
  // reused from the database when every executed op is there; then one timeline run for the
  // start times and the gaps between ops.
  void timeOps(const GraphRunner::Trace& capture);
  // The model's method called alone by TorchScript (settings.model_run_ms), first: no hooks,
  // no grad, with the heap holding what a user's process holds.
  void timeWholeRun(torch::jit::Module& module);

  static std::map<std::string, std::vector<std::size_t>>
  groupByKey(const std::vector<std::string>& keys);

  // A timeline is stored as two entries whose samples are the ops' start times and durations.
  bool loadTimeline(const std::string& key, std::size_t n, GraphRunner::Trace& line);

  void storeTimeline(const std::string& key, const GraphRunner::Trace& line);

  void buildRecords(const GraphRunner::Trace& t, const tspass::MutationInfo& mutation);

  void measureConversions(const GraphRunner::Trace& t);

  void measureSweep();

  void measureConsumers(const GraphRunner::Trace& t);

  // Layout regions of the model frozen (a copy, frozen as xrewrite --freeze freezes it), each
  // run in isolation on the real inputs in every candidate layout (regions.cpp).
  void measureRegions();
  // A non-contiguous value's pointwise producer writing it row-major itself (out variant).
  void measureProducerFusion(const GraphRunner::Trace& t);
  // A region entry's conversion to channels-last (3d), added to the conversion cost table.
  void measureEntryConversion(const at::Tensor& t, int rank);

  // --budget: whether the share `share` of it has passed since the profile began (the
  // conversions and consumers stop at kEarlyShare, the regions at the whole).
  static constexpr double kEarlyShare = 0.4;
  // The model's op timings take at most this share of it; what comes after the regions
  // (the timeline, writing the profile) is left this share.
  static constexpr double kOpShare = 0.12;
  static constexpr double kReserveShare = 0.05;
  bool pastBudget(double share) const {
    if (o_.budget_s <= 0)
      return false;
    const bool past = msSince(start_) > share * o_.budget_s * 1e3;
    budget_spent_ = budget_spent_ || past;
    return past;
  }

  // --budget: milliseconds left of it (-1: no budget).
  double budgetLeftMs() const {
    return o_.budget_s <= 0 ? -1 : std::max(0.0, o_.budget_s * 1e3 - msSince(start_));
  }
  // --budget: milliseconds the regions may still take (what is left less kReserveShare of the
  // budget; below 0 when the reserve is reached); nullopt without a budget.
  std::optional<double> regionsLeftMs() const {
    if (o_.budget_s <= 0)
      return std::nullopt;
    return budgetLeftMs() - kReserveShare * o_.budget_s * 1e3;
  }
  // A region's round of candidates slower than this warms up once (under --budget: its first
  // round is its warm-up); under --budget a candidate more than kHopeless times the region as
  // it is then is timed no further (within 5% it could gain nothing worth a second's round).
  static constexpr double kSlowRoundMs = 1000;
  static constexpr double kHopeless = 1.05;
  // ... and one more than kOutpaced times the fastest other candidate cannot be chosen either.
  static constexpr double kOutpaced = 1.5;

  const ProfileOptions& o_;
  // The budget counts what was spent before the profile began (xprof: the process's start).
  std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now() -
      std::chrono::microseconds(static_cast<std::int64_t>(o_.spent_before_ms * 1e3));
  mutable bool budget_spent_ = false; // something was left untimed: the profile is not memoized
  double capture_ms_ = 0;             // the model's first run (keeping every value), ms
  std::optional<tspass::LoadedModel> frozen_; // under --freeze: the model, frozen
  Progress progress_;
  formats::Profile p_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::vector<tspass::ExposedLinear> exposed_;
  std::unique_ptr<tspass::GraphIndex> index_;
  std::unique_ptr<GraphRunner> runner_;
  std::unique_ptr<TimingDb> db_;
  std::string db_device_, db_library_; // its scope (xprof's launcher reads the profile there)
  std::vector<c10::IValue> inputs_;
  std::string input_file_sha256_; // "" without --input-file
  std::vector<OpTiming> timeline_;
};

} // namespace xalloc::profiler::detail
