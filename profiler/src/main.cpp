// xprof command line: parses flags into XprofOptions and calls runXprof.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "xalloc/error.h"
#include "xalloc/profiler/tool.h"
#include "xalloc/scheduler/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  xalloc::profiler::XprofOptions o;
  auto& p = o.profile;
  CLI::App app{"xprof: profile a TorchScript model: each tensor's layout and consumers, per-op "
               "times, and what .contiguous() costs and saves, measured.",
               "xprof"};
  app.add_option("model", p.model, "TorchScript model file (torch.jit.save)")->required();
  app.add_option("-o,--output", o.output, "write profile.json here (default: stdout)");
  app.add_option("--method", p.method, "method to profile")->capture_default_str();
  app.add_option("--input-shape", o.input_shapes,
                 "shape of an input, e.g. 4x64 (repeat per input; default: the model's "
                 "xalloc/example_inputs.json)");
  app.add_option("--input-dtype", o.input_dtypes, "dtype of an input (float32, int64, ...)");
  app.add_option("--input-range", o.input_ranges,
                 "LOW:HIGH for an input (integers: uniform in [LOW, HIGH))");
  app.add_option("--input-file", p.input_file,
                 "inputs saved with torch.save (a tensor, or a tuple or list of them)");
  app.add_option("--iterations", p.iterations, "timed runs of the whole model")
      ->capture_default_str();
  app.add_option("--warmup", p.warmup, "untimed runs before measuring")->capture_default_str();
  app.add_option("--repeats", p.repeats, "repetitions of each isolated measurement")
      ->capture_default_str();
  app.add_option("--threads", p.threads, "intra-op threads (0: libtorch's default)")
      ->capture_default_str();
  app.add_option("--seed", p.seed, "seed of the random example inputs")->capture_default_str();
  app.add_flag("--sweep", p.sweep,
               "also measure a synthetic sweep of non-contiguous layouts for the cost model");
  app.add_option("--sweep-count", p.sweep_count, "layouts in the sweep")->capture_default_str();
  std::string sweep_max;
  app.add_option(
      "--sweep-max-bytes", sweep_max,
      "largest layout of the sweep, e.g. 64M (default: 256M, or less on small machines)");
  app.add_option("--db", p.db_path, "timing database (default: ~/.cache/xalloc/timings.sqlite)");
  bool no_db = false;
  app.add_flag("--no-db", no_db, "measure everything; neither read nor write the timing database");
  app.add_option("--trace", p.trace_path, "also write a Chrome/Perfetto trace here");
  bool no_consumers = false;
  app.add_flag("--no-consumers", no_consumers, "skip re-running consumers (faster, no savings)");
  app.add_flag("-q,--quiet", o.quiet, "no summary line on stderr");
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  p.measure_consumers = !no_consumers;
  p.use_db = !no_db;
  p.progress = !o.quiet;
  if (!sweep_max.empty()) {
    auto bytes = xalloc::scheduler::parseBytes(sweep_max);
    if (!bytes || *bytes < 4096) {
      std::fprintf(stderr,
                   "xprof: error: --sweep-max-bytes: cannot read '%s' as a size of at "
                   "least 4K\n",
                   sweep_max.c_str());
      return xalloc::kExitError;
    }
    p.sweep_max_bytes = *bytes;
  }
  return xalloc::runGuarded("xprof", [&] { return xalloc::profiler::runXprof(o); });
}
