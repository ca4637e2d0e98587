// What a layout change does to a value's consumers: each consumer re-run in isolation on the
// captured inputs, with the value as it is and with the other layout (xprof's consumer timings).
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/consumer_timing.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/progress.h"
#include "xalloc/tspass/linear.h"

namespace xalloc::profiler {

class TimingDb;

/// A finished capture run and how to measure in it.
/// The note of what was not timed because xprof's budget was spent.
inline constexpr const char* kBudgetSpent =
    "not timed: xprof's time budget was spent (--budget; a later run times it)";

struct ConsumerContext {
  const GraphRunner& runner;
  const tspass::GraphIndex& index;
  const GraphRunner::Trace& trace; // with every value kept
  TimingDb* db;                    // nullptr: measure everything
  int warmup;
  int repeats;
  /// The linears the graph was exposed from (tspass/linear.h): their matmuls are re-run as
  /// the rewrite would run them, the whole linear with its bias.
  const std::vector<tspass::ExposedLinear>* exposed = nullptr;
  /// Measure again, whatever the database holds, and keep the new timings only when they are
  /// quieter than those already in the consumer (then the database gets them too).
  bool again = false;
  /// True once the profile's budget for these measurements is spent (null: never).
  std::function<bool()> out_of_time = nullptr;
};

/// Fills `c` (a consumer of `v`) with timings of its reader with `v` as it is and with `other`
/// in its place: `other` is `v` made contiguous (`to_contiguous`), or, for the output of an
/// existing aten::contiguous, the conversion's non-contiguous input. Ops that only read
/// metadata, mutate, have side effects, sit in a branch not taken or fail are not timed; the
/// note says why. Outputs of the two runs are compared on every call (identical_output,
/// same_output_layout); only timings come from the database. A list or tuple consumer is
/// measured through the one op that reads it, with `v` swapped inside the list. The matmul of
/// an exposed linear is measured as the linear: as it is, `aten::linear` (what the model runs
/// while nothing converts the transposed weight); with its transposed weight made contiguous,
/// `add(matmul(x, contiguous(t(W))), b)`, the ops the rewrite leaves.
/// When the other layout changes the reader's output layout (a transpose of a value made
/// contiguous), the consumers of that output are measured the same way with the output the other
/// layout gives (`downstream`), up to three levels deep: what runs after the reader is where the
/// change gains or loses.
/// True when the timings were measured now, false when they came from the database or the
/// consumer was not timed.
bool measureConsumer(const ConsumerContext& ctx, const torch::jit::Value* v,
                     const at::Tensor& other, bool to_contiguous, formats::ConsumerTiming& c);

/// Re-runs each consumer of each record in isolation (measureConsumer) with the value as it is
/// and with the other layout: made contiguous for a non-contiguous value; for the output of an
/// existing aten::contiguous, the conversion's (non-contiguous) input instead. Then measures
/// once more each timing measured now that came out disturbed, and keeps the quieter one: the
/// machine's slow moments last long enough to cover a whole measurement, and a consumer measured
/// in one ran a third slower with its gain lost in the spread.
void measureRecordConsumers(std::vector<formats::Record>& records, const ConsumerContext& ctx,
                            Progress& progress);

} // namespace xalloc::profiler
