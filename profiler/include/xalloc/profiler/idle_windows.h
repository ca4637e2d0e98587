// Windows of spare compute on the CPU, from one timeline run and the ops' utilization: what
// xprof reports as gpu_idle_events on a CPU (the method is in profiler/README.md).
#pragma once

#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/trace.h"

namespace xalloc::profiler {

/// During an op, cores × (1 − utilization) cores are idle (an op that keeps one of two cores
/// busy leaves one idle): a "cpu-spare" window when at least a quarter core is spare. Between
/// two ops only the interpreter's thread is busy: a "host-gap" window with all but one core
/// spare. Work in a window around op k may start when the op before k is done and must be done
/// before the op after k starts. `timeline` and `ops` are indexed by op id; windows shorter than
/// `min_window_ms` are left out.
std::vector<formats::IdleEvent> findCpuIdleWindows(const std::vector<OpTiming>& timeline,
                                                   const std::vector<formats::Op>& ops, int cores,
                                                   double min_window_ms);

} // namespace xalloc::profiler
