// One consumer timed with a value as it is and with the other layout, and its outputs compared:
// what xprof's graph re-runs (consumers.h) and the preloaded hook's dispatcher re-runs share.
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/ivalue.h>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/measure.h"

namespace xalloc::profiler {

/// A consumer timing a slow moment of the machine disturbed: the paired differences spread
/// (IQR) over more than 8% of the consumer's time, where a quiet measurement spreads 2-4%. Ops
/// under 50 us are left alone (the timer's grain is a large share of them; xsched's margin
/// covers them).
bool disturbed(const formats::ConsumerTiming& c);

/// Runs a consumer once as it is (`run(false)`) and once with the other layout (`run(true)`)
/// and records whether the outputs agree. False, with `c.note` saying why, when a run throws
/// (the other layout refused: `accepts_noncontiguous` is false for a conversion's source).
/// When the other layout gives outputs of another layout (`same_output_layout` false) and
/// `other_outputs` is given, it gets those outputs, to follow them downstream without a rerun.
bool compareLayouts(const std::function<std::vector<c10::IValue>(bool other)>& run,
                    bool to_contiguous, formats::ConsumerTiming& c,
                    std::vector<c10::IValue>* other_outputs = nullptr);

/// Fills `c`'s timings from interleaved runs as-is (a) and with the other layout (b).
void setTimings(const PairedTiming& m, bool to_contiguous, formats::ConsumerTiming& c);

} // namespace xalloc::profiler
