// xprof command line: parses flags into XprofOptions and calls runXprof.
#include <CLI/CLI.hpp>

#include "xalloc/profiler/tool.h"
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
  app.add_option("--iterations", p.iterations, "timed runs of the whole model")
      ->capture_default_str();
  app.add_option("--warmup", p.warmup, "untimed runs before measuring")->capture_default_str();
  app.add_option("--repeats", p.repeats, "repetitions of each isolated measurement")
      ->capture_default_str();
  app.add_option("--threads", p.threads, "intra-op threads (0: libtorch's default)")
      ->capture_default_str();
  app.add_option("--seed", p.seed, "seed of the random example inputs")->capture_default_str();
  bool no_consumers = false;
  app.add_flag("--no-consumers", no_consumers, "skip re-running consumers (faster, no savings)");
  app.add_flag("-q,--quiet", o.quiet, "no summary line on stderr");
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  p.measure_consumers = !no_consumers;
  return xalloc::runGuarded("xprof", [&] { return xalloc::profiler::runXprof(o); });
}
