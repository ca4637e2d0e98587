// xbench-latency: original versus rewritten model latency, measured side by side in one run.
// Runs alternate (A B B A ...) after a warm-up, so drift hits both alike; prints medians,
// interquartile ranges and the speedup ratio (original / rewritten).
//
// Usage: xbench-latency ORIGINAL.pt REWRITTEN.pt [--runs N] [--warmup N] [--threads N]
//                      [--input-file INPUTS.pt]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/csrc/jit/api/module.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/op_library.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/runtime/async.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/model_warnings.h"
#include "xalloc/tspass/threads.h"
#include "xalloc/tspass/value_compare.h"

#include "bench_inputs.h"

using namespace xalloc;

namespace {

struct Args {
  std::string a, b;
  int runs = 50;
  int warmup = 5;
  int threads = 0;
  std::string input_file; // torch.save of a tensor, tuple or list; else the model's example inputs
  std::vector<std::string> input_shapes, input_dtypes, input_ranges;
  std::vector<std::string> op_libraries; // --load-library
};

int run(const Args& args) {
  if (args.runs < 30)
    throw InputError("xbench-latency", "--runs must be at least 30 for a stable median");
  auto ma = tspass::loadModel(args.a);
  auto mb = tspass::loadModel(args.b);
  if (args.threads > 0)
    tspass::setMathThreads(args.threads);
  std::vector<c10::IValue> inputs =
      bench::benchInputs(ma.module, ma.extra_files, ma.path, args.input_file,
                         tspass::specsFromFlags(args.input_shapes, args.input_dtypes,
                                                args.input_ranges, "xbench-latency"));
  // Same results first: a faster model that computes something else is not faster.
  if (!xalloc::tspass::bitwiseEqual(ma.module.forward(inputs), mb.module.forward(inputs)))
    throw InputError(args.b, "outputs differ from " + args.a);
  auto [sa, sb, delta] =
      profiler::timeInterleaved([&] { (void)ma.module.forward(inputs); },
                                [&] { (void)mb.module.forward(inputs); }, args.warmup, args.runs);
  std::printf("%-44s %10s %10s %6s\n", "model", "median ms", "IQR ms", "runs");
  std::printf("%-44s %10.3f %10.3f %6d\n", args.a.c_str(), sa.median_ms, sa.iqr_ms, args.runs);
  std::printf("%-44s %10.3f %10.3f %6d\n", args.b.c_str(), sb.median_ms, sb.iqr_ms, args.runs);
  std::printf("speedup (original / rewritten): %.4fx   paired difference %+.3f ms (IQR %.3f)   "
              "outputs: bit-identical\n",
              sa.median_ms / sb.median_ms, delta.median_ms, delta.iqr_ms);
  return kExitOk;
}

} // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Latency of two TorchScript models, timed interleaved in one process.",
               "xbench-latency"};
  app.add_option("original", args.a, "the original model")->required();
  app.add_option("rewritten", args.b, "the rewritten model")->required();
  app.add_option("--runs", args.runs, "timed runs of each")->check(CLI::PositiveNumber);
  app.add_option("--warmup", args.warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", args.threads, "libtorch and BLAS threads, set together")
      ->check(CLI::PositiveNumber);
  addModelInputFlags(app, {args.input_shapes, args.input_dtypes, args.input_ranges, args.input_file,
                           args.op_libraries});
  if (auto code = parseCommandLine(app, argc, argv))
    return *code;
  return runGuarded("xbench-latency", [&] {
    runtime::loadOps(); // models rewritten with --form fast call xalloc:: ops
    xalloc::tspass::routeModelWarnings();
    for (const auto& lib : args.op_libraries)
      loadOpLibrary(lib);
    return run(args);
  });
}
