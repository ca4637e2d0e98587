// Honest timing: warm-up, repeated runs, medians with interquartile range, and A/B measurements
// taken interleaved so that drift (frequency, cache state, a neighbour's load) hits both alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace xalloc::profiler {

struct TimingStats {
  std::vector<double> samples_ms;
  double median_ms = 0;
  double iqr_ms = 0;
};

/// One stored measurement: median and spread, the samples, and one auxiliary number (an op's
/// utilization, for instance).
struct StoredTiming {
  TimingStats stats;
  double aux = 0;
};

/// Where measurements are kept between runs: measuring code asks it before it measures and
/// stores what it measured. xprof's timing database (timing_db.h, SQLite) is one; code that
/// measures depends on this interface only, so the preloaded hook links no database.
class TimingStore {
public:
  virtual ~TimingStore() = default;
  virtual std::optional<StoredTiming> get(const std::string& key) = 0;
  /// Every one of `keys` (a measurement stored as several entries), or nothing when one is
  /// missing.
  virtual std::optional<std::vector<StoredTiming>> getAll(const std::vector<std::string>& keys) = 0;
  virtual void put(const std::string& key, const StoredTiming& value) = 0;
};

/// Median and interquartile range of samples (linear interpolation between order statistics).
TimingStats summarize(std::vector<double> samples_ms);

/// Milliseconds elapsed on a monotonic clock since `start`.
inline double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Times `f` `repeats` times after `warmup` untimed calls.
TimingStats timeRepeated(const std::function<void()>& f, int warmup, int repeats);

/// A/B timings taken alternately (A B, then B A, ...) so both see the same conditions, and the
/// paired differences b - a of each adjacent pair: noise common to a pair cancels out of them,
/// so their median estimates the difference far more tightly than the two medians do.
struct PairedTiming {
  TimingStats a, b, delta;
};

PairedTiming timeInterleaved(const std::function<void()>& a, const std::function<void()>& b,
                             int warmup, int repeats);

/// Warm-up and repetition counts scaled to what one run costs: the requested counts while they
/// fit a time budget, fewer for slow work (a large layer, a whole model), never below a floor.
/// A 200 ms matmul needs no 15 paired repeats to show a 3 ms saving, and timing it 36 times made
/// profiling a BERT-base take 45 forward passes.
struct Counts {
  int warmup = 0;
  int repeats = 0;
};
/// `run_ms`: one run (of a pair, for paired timings); `budget_ms`: the most the timed runs should
/// take together; `min_repeats`: the floor.
Counts budgetedCounts(double run_ms, int warmup, int repeats, double budget_ms, int min_repeats);

/// Budgets of the profiler's measurements (ms).
constexpr double kPairBudgetMs = 1000;   // one consumer re-run with both layouts
constexpr double kModelBudgetMs = 20000; // the model's timed iterations

/// Process CPU time in ms (all threads).
double processCpuMs();

/// How long ago this process started, in ms (from /proc/self/stat; 0 where it cannot be read).
/// xprof's budget counts from here: `xprof` execs xprof-core, so loading libtorch and the model
/// is part of what the user waits for.
double processAgeMs();

/// glibc's malloc adapts its mmap threshold to what a process frees, so the same allocation can
/// page-fault in one measurement and not in the next, depending on what came before. Measure in
/// the steady state a long-running model reaches instead: blocks below 32 MiB (glibc's largest
/// dynamic threshold) come from the heap and are reused, larger ones are mapped (and faulted in)
/// each time, and freed memory is not returned to the system between measurements.
void steadyStateMalloc();

} // namespace xalloc::profiler
