// xbench-profile: what profiling costs. For each model: one plain forward pass (the JIT, after a
// warm-up, median of 30), a first xprof profile with an empty timing database, a second one
// with a setting changed that no measurement depends on (every measurement is reused, the model
// still runs), and a third with the first one's settings (the finished profile is reused) — as
// ratios to the forward pass and first / second, first / third.
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
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/profiler.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"

using namespace xalloc;

namespace {

double forwardMs(const std::string& path) {
  auto m = tspass::loadModel(path);
  auto specs = xalloc::tspass::specFromExtraFiles(m.extra_files, path);
  auto inputs =
      xalloc::tspass::methodInputs(m.module, "forward", xalloc::tspass::makeInputs(specs, 0), path);
  inputs.erase(inputs.begin());
  return profiler::timeRepeated([&] { (void)m.module.forward(inputs); }, 5, 30).median_ms;
}

int run(const std::vector<std::string>& models) {
  std::printf("%-16s %10s %10s %10s %10s %9s %9s %9s %9s %9s\n", "model", "forward ms", "1st ms",
              "2nd ms", "3rd ms", "1st/fwd", "2nd/fwd", "3rd/fwd", "1st/2nd", "1st/3rd");
  for (const auto& path : models) {
    const std::string db = (std::filesystem::temp_directory_path() /
                            ("xbench_profile_" + std::to_string(::getpid()) + ".sqlite"))
                               .string();
    std::filesystem::remove(db);
    const double fwd = forwardMs(path);
    profiler::ProfileOptions o;
    o.model = path;
    o.db_path = db;
    auto timed = [](const profiler::ProfileOptions& opts) {
      auto t0 = std::chrono::steady_clock::now();
      (void)profiler::profileModel(opts);
      return profiler::msSince(t0);
    };
    const double first = timed(o);
    profiler::ProfileOptions measurements_only = o;
    measurements_only.min_window_ms = o.min_window_ms * 2;
    const double second = timed(measurements_only);
    const double third = timed(o);
    std::filesystem::remove(db);
    std::string name = path.substr(path.rfind('/') + 1);
    std::printf("%-16s %10.2f %10.1f %10.1f %10.1f %8.1fx %8.1fx %8.2fx %8.1fx %8.1fx\n",
                name.c_str(), fwd, first, second, third, first / fwd, second / fwd, third / fwd,
                first / second, first / third);
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
