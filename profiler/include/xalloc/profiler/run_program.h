// `xprof run -- ./prog args…`: profiles an unmodified libtorch program. The program runs with
// libxprof_hook.so preloaded (profiler/hook/hook.cpp), which records each op the program calls,
// its tensors, timings and consumer re-runs; this side symbolizes the recorded stacks with
// llvm-symbolizer (debug info) into `file:line:col` call sites in the user's sources and writes
// the same profile.json as for TorchScript models.
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/profile.h"

namespace xalloc::profiler {

struct RunOptions {
  std::vector<std::string> command; // the program and its arguments
  int iterations = 3;               // calls measured per call site
  int warmup = 2;
  int repeats = 15;
  bool measure_consumers = true;
  double min_window_ms = 0.01;
  std::string hook;       // "": libxprof_hook.so next to xprof (or $XPROF_HOOK)
  std::string symbolizer; // "": llvm-symbolizer-14 / llvm-symbolizer on PATH ($XPROF_SYMBOLIZER)
  std::string base_dir;   // source paths under it are written relative to it ("": the cwd)
  bool program_stdout_to_stderr = false; // when the profile itself goes to stdout
};

/// One resolved frame: where in the sources, in which function.
struct CallSite {
  std::string file; // as the debug info names it (absolute when compiled so)
  std::string function;
  std::int64_t line = 0;
  std::int64_t col = 0;
};

/// A source file that belongs to the user's program, not to libtorch, the C++ library or the
/// system: where an edit can be made.
bool isUserSource(const std::string& file);

/// "ns::Cls::forward(at::Tensor const&) const" -> "ns::Cls::forward".
std::string functionWithoutParameters(const std::string& demangled);

/// Runs the program under the hook and builds its profile. Throws InputError when the program
/// cannot be run, fails, or made no libtorch calls we could see.
formats::Profile profileProgram(const RunOptions& options);

} // namespace xalloc::profiler
