// `xprof --trace trace.json`: a Chrome / Perfetto trace of a profile — the ops of one run on a
// timeline, the windows of spare capacity beside them, and every measurement xprof took — so a
// user can open it in chrome://tracing or ui.perfetto.dev and look.
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/profile.h"

namespace xalloc::profiler {

struct OpTiming {
  double start_ms = -1; // -1: not executed in the timeline run
  double duration_ms = 0;
};

/// Writes the trace (atomically). `timeline` gives each op's start and duration in the timeline
/// run (indexed by op id).
void writeChromeTrace(const std::string& path, const formats::Profile& profile,
                      const std::vector<OpTiming>& timeline);

} // namespace xalloc::profiler
