// xbench-profile: what profiling costs. For each model: one plain forward pass (the JIT, after a
// warm-up, median of 30), a first xprof profile with an empty timing database, and a second one
// that reuses it — as ratios: profile / forward, and first / second.
//
// Usage: xbench-profile MODEL.pt ...
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <unistd.h>

#include "xalloc/error.h"
#include "xalloc/profiler/inputs.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/profiler.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/model_io.h"

using namespace xalloc;

namespace {

double forwardMs(const std::string& path) {
  auto m = tspass::loadModel(path);
  auto specs = profiler::specFromExtraFiles(m.extra_files, path);
  auto inputs = profiler::methodInputs(m.module, "forward", profiler::makeInputs(specs, 0), path);
  inputs.erase(inputs.begin());
  return profiler::timeRepeated([&] { (void)m.module.forward(inputs); }, 5, 30).median_ms;
}

int run(const std::vector<std::string>& models) {
  std::printf("%-28s %10s %12s %12s %10s %10s %12s\n", "model", "forward ms", "profile 1 ms",
              "profile 2 ms", "1/forward", "2/forward", "1st/2nd run");
  for (const auto& path : models) {
    const std::string db = (std::filesystem::temp_directory_path() /
                            ("xbench_profile_" + std::to_string(::getpid()) + ".sqlite"))
                               .string();
    std::filesystem::remove(db);
    const double fwd = forwardMs(path);
    profiler::ProfileOptions o;
    o.model = path;
    o.db_path = db;
    auto t0 = std::chrono::steady_clock::now();
    (void)profiler::profileModel(o);
    const double first = profiler::msSince(t0);
    t0 = std::chrono::steady_clock::now();
    (void)profiler::profileModel(o);
    const double second = profiler::msSince(t0);
    std::filesystem::remove(db);
    std::string name = path.substr(path.rfind('/') + 1);
    std::printf("%-28s %10.2f %12.1f %12.1f %9.0fx %9.0fx %11.1fx\n", name.c_str(), fwd, first,
                second, first / fwd, second / fwd, first / second);
  }
  std::printf("(in one process: libtorch's own start-up, ~0.35 s per xprof command, is not "
              "included)\n");
  return kExitOk;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models(argv + 1, argv + argc);
  return runGuarded("xbench-profile", [&] { return run(models); });
}
