// The scripted samples the libtorch tests profile, and quick settings to profile them with.
#pragma once

#include <string>

#include "xalloc/profiler/profiler.h"

namespace xalloc::testing {

inline std::string samplePath(const std::string& name) {
  return std::string(XALLOC_SAMPLES_DIR) + "/" + name + ".pt";
}

inline profiler::ProfileOptions quickOptions(const std::string& name) {
  profiler::ProfileOptions o;
  o.model = samplePath(name);
  o.iterations = 3;
  o.warmup = 1;
  o.repeats = 5;
  o.use_db = false; // each test measures for itself (the database has tests of its own)
  return o;
}

} // namespace xalloc::testing
