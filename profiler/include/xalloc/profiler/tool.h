// xprof as a function: options in a plain struct, an exit code out (see main.cpp for the flags).
#pragma once

#include <string>
#include <vector>

#include "xalloc/profiler/profiler.h"

namespace xalloc::profiler {

struct XprofOptions {
  ProfileOptions profile;
  std::vector<std::string> input_shapes; // "4x64", one per input
  std::vector<std::string> input_dtypes; // matched by position; the last one repeats
  std::vector<std::string> input_ranges; // "LOW:HIGH", matched by position; the last one repeats
  std::string output;                    // profile.json, "-" or "" (stdout)
  bool quiet = false;
};

int runXprof(XprofOptions options);

} // namespace xalloc::profiler
