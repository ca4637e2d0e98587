// xprof as functions: options in plain structs, an exit code out. The flags that fill them are
// in cli.h; main.cpp only parses and calls.
#pragma once

#include <string>
#include <vector>

#include "xalloc/profiler/profiler.h"
#include "xalloc/profiler/run_program.h"

namespace xalloc::profiler {

struct XprofOptions {
  ProfileOptions profile;
  std::vector<std::string> input_shapes; // "4x64", one per input
  std::vector<std::string> input_dtypes; // matched by position; the last one repeats
  std::vector<std::string> input_ranges; // "LOW:HIGH", matched by position; the last one repeats
  std::string output;                    // profile.json, "-" or "" (stdout)
  bool quiet = false;
  std::vector<std::string> op_libraries; // --load-library, loaded before the model
  std::string sweep_max;                 // --sweep-max-bytes as given ("": the default)
};

/// Profiles a TorchScript model and writes profile.json.
int runXprof(XprofOptions options);

struct XprofRunOptions {
  RunOptions run;
  std::string output;    // profile.json, "-" or "" (stdout)
  std::string build_dir; // -p: complete each call site's anchor with Clang from this folder
  bool quiet = false;
};

/// `xprof run`: profiles an unmodified libtorch program and writes profile.json.
int runXprofRun(XprofRunOptions options);

} // namespace xalloc::profiler
