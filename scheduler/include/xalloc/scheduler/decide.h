// xsched's decisions: the per-site rules (scheduler/src/rules/, listed in rules.def) give each
// value a verdict (`sync` when the measured saving of its consumers beats the conversion's cost
// by more than the measurement noise, `remove` when an existing conversion costs more than it
// saves, `none` otherwise, vetoes such as a write or the tolerance); layout regions are chosen
// from their timed candidates; then the solver weighs the sites together under idle-window
// capacity and the memory budget, exactly for small instances (branch and bound, solver.cpp)
// and within a reported gap for large ones.
#pragma once

#include <optional>
#include <string>

#include "xalloc/formats/cost.h"
#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler {

/// Outputs of at least this many bytes the runtime's conversions (the fast form) map once and
/// reuse (xalloc::runtime::kHugePageOutputBytes), so they pay no fresh output after the first.
inline constexpr std::int64_t kFastFormReusedOutputBytes = std::int64_t{4} << 20;

/// One site as the per-site rules decided it, before the solver weighs sites together: the
/// verdict and the rule that gave it (its name in scheduler/src/rules/rules.def).
struct SiteVerdict {
  std::int64_t value_id = 0;
  formats::Action action = formats::Action::None;
  bool veto = false; // ruled out whatever it gains (else only too small to be sure of)
  std::string rule;
  formats::Blocker blocker = formats::Blocker::None;
  formats::NamedValues values; // what the rule weighed, by name
  std::string reason;          // the values in words
};

struct SchedOptions;

/// The input shapes a profile measured: "1x3x224x224" (several inputs joined by ","); "" when
/// it records none.
std::string inputShapes(const formats::Profile& p);

/// The per-site verdicts of a profile, in the order of its records.
std::vector<SiteVerdict> siteVerdicts(const formats::Profile& p, const formats::Cost& cost,
                                      const SchedOptions& o);

struct SchedOptions {
  /// The rewrite the plan is for. "portable": every conversion is an aten::contiguous, which
  /// pays for a fresh output (allocation, and first touches of newly mapped pages), and there is
  /// no async. "fast": the runtime's conversions, which reuse large outputs, and async ones in
  /// idle windows.
  formats::RewriteForm form = formats::RewriteForm::Portable;
  /// A decision must gain at least this much (ms) ...
  double min_gain_ms = 0.001;
  /// ... and more than `z` standard errors of the measurements it rests on ...
  double z = 2.0;
  /// ... and more than this fraction of the time it trades (the consumers it affects and the
  /// conversion itself).
  double min_relative_gain = 0.05;
  /// ... for a layout region: this fraction of the region's time. Its candidates are timed
  /// against each other in the same rounds (paired, drift cancels), on its own values, so a
  /// smaller share repeats; the noise margin still applies.
  double min_region_gain = 0.02;
  /// ... and at least this fraction of the model's time (its ops' durations summed): smaller
  /// gains are not worth an edit, and they come and go between runs.
  double min_model_gain = 0.001;
  /// Profiles of the same model at other input shapes (xsched --shape-profile): each region
  /// runs in a layout that is measured not slower beyond the noise at any of the shapes, and
  /// faster at one, the fastest over the set (geometric mean); its decision records the shapes.
  const std::vector<formats::Profile>* other_shapes = nullptr;
  /// Predicted peak activation memory must stay within this many bytes (nullopt = no limit).
  std::optional<std::int64_t> memory_budget_bytes;
  /// Async conversions may fill this fraction of an idle window (room for prediction error).
  double window_safety = 0.9;
  /// Side workers that run async conversions (a window's capacity is its duration times the
  /// idle cores, up to this many).
  int async_workers = 1;
  /// Consider async decisions at all.
  bool allow_async = true;
  /// What starting a conversion on a side worker and waiting for it costs the critical path
  /// (a hand-off to a worker thread and back); an async decision gains its saving minus this.
  double async_overhead_ms = 0.02;
  SolveLimits limits;
  /// How far a consumer's outputs may move when its input's layout changes: max |new - as-is|
  /// over max |as-is| per output, as xprof measured it. 0: bit-identical only (--exact).
  double tolerance = formats::kDefaultTolerance;
  /// Whether a region may also move its outputs within float32's own noise
  /// (formats::noiseBound of its rounding_error): with the default tolerance; an explicit
  /// --tolerance (or --exact) is a hard bound.
  bool within_noise = true;
};

/// formats::withinTolerance (the one accept rule) of a consumer's measured change.
using formats::withinTolerance;
bool withinTolerance(const formats::ConsumerTiming& c, double tolerance);

/// Standard error of a median of `n` samples whose interquartile range is `iqr`.
double medianStandardError(double iqr, std::int64_t n);

/// Predicted peak activation bytes (graph inputs and op outputs; weights excluded) of the
/// profiled run with the given decisions applied.
std::int64_t predictedPeakBytes(const formats::Profile& profile,
                                const std::vector<formats::Decision>& decisions);

/// Decides every candidate site. Throws InputError when the budget is below the model's own peak.
formats::Schedule makeSchedule(const formats::Profile& profile, const formats::Cost& cost,
                               const SchedOptions& options = {});

/// The plan as Chrome/Perfetto trace JSON: compute ops, idle windows, async conversions on a
/// side-worker track, sync conversions before their first consumer.
std::string planTraceJson(const formats::Schedule& schedule);

/// A table a person can read: site, source line, layout, decision, why.
std::string explainSchedule(const formats::Schedule& schedule);

} // namespace xalloc::scheduler
