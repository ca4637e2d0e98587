// What the hook records per call site (hook.cpp's Recorder), and how the recorded sites become
// the profile's ops and the hook's stacks (export.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/hook_record.h"

namespace xprof_hook {

/// A return address, as (loaded object, offset from its load address).
struct Frame {
  int module = -1; // index into the Recorder's modules, -1 when no loaded object holds it
  std::uintptr_t offset = 0;
};

/// A libtorch op called from one call stack.
struct Site {
  std::string kind;
  std::vector<int> frames; // indices into the Recorder's frames, innermost first
  bool user = false;       // some frame is the program's own code
  std::int64_t calls = 0;
  std::int64_t recorded = 0;
  std::int64_t id = -1; // op id once recorded (first-recorded order)
  std::vector<double> ms, cpu_ms, gap_ms;
  std::vector<std::int64_t> inputs, outputs; // value ids (of the first recorded call)
  bool shared_call = false;                  // another site's op ran in the same user call instance
};

/// The recorded sites, in recorded order, as the profile's ops (each site's calls summarized:
/// median, spread, CPU use over `cores`; laid out on one timeline per call) and as the hook
/// record's stacks.
void summarizeSites(const std::vector<Site*>& order, const std::vector<Frame>& frames, int cores,
                    xalloc::formats::Profile& p, xalloc::profiler::HookRecord& record);

} // namespace xprof_hook
