// xbench-peer: the original model, the peer (what a TorchScript user already has,
// torch.jit.optimize_for_inference(torch.jit.freeze(m))) and our rewrites, timed side by side in
// one process. Every round runs every contender once, in an order that rotates and reverses from
// round to round, so drift hits all alike; the ratios are medians of per-round ratios.
//
// Usage: xbench-peer ORIGINAL.pt [OURS.pt ...] [--runs N] [--warmup N] [--threads N]
//                    [--input-file INPUTS.pt] [--peer-of-ours] [--json FILE]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/op_library.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/runtime/async.h"
#include "xalloc/threads.h"
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
  std::string original;
  std::vector<std::string> ours;
  int runs = 50;
  int warmup = 5;
  int threads = 1;
  bool peer_of_ours = false;
  std::string input_file;
  std::vector<std::string> input_shapes, input_dtypes, input_ranges;
  std::string json_out;
  std::vector<std::string> op_libraries;
};

struct Contender {
  std::string name;
  torch::jit::Module module;
  double error = 0; // max |out - original| / max |original|, over the outputs
  std::vector<double> ms;
};

// What a TorchScript user already has: freeze (eval mode first, as torch.jit.freeze asks), then
// optimize_for_inference. Done on a clone, so the original is left as it was loaded.
torch::jit::Module peerOf(const torch::jit::Module& m) {
  torch::jit::Module c = m.clone();
  c.eval();
  torch::jit::Module frozen = torch::jit::freeze(c);
  return torch::jit::optimize_for_inference(frozen);
}

int run(const Args& args) {
  if (args.runs < 30)
    throw InputError("xbench-peer", "--runs must be at least 30 for a stable median");
  const int threads = tspass::setMathThreads(args.threads);
  auto orig = tspass::loadModel(args.original);
  std::vector<c10::IValue> inputs =
      bench::benchInputs(orig.module, orig.extra_files, orig.path, args.input_file,
                         tspass::specsFromFlags(args.input_shapes, args.input_dtypes,
                                                args.input_ranges, "xbench-peer"));

  std::vector<Contender> cs;
  cs.push_back({"original", orig.module, 0, {}});
  cs.push_back({"peer", peerOf(orig.module), 0, {}});
  for (const auto& path : args.ours) {
    auto m = tspass::loadModel(path);
    const std::string name = std::filesystem::path(path).filename().string();
    cs.push_back({name, m.module, 0, {}});
    if (args.peer_of_ours)
      cs.push_back({name + " +peer", peerOf(m.module), 0, {}});
  }
  const c10::IValue reference = cs[0].module.forward(inputs);
  for (auto& c : cs)
    c.error = tspass::maxRelativeError(reference, c.module.forward(inputs));

  for (int w = 0; w < args.warmup; ++w)
    for (auto& c : cs)
      (void)c.module.forward(inputs);
  const std::size_t n = cs.size();
  for (int r = 0; r < args.runs; ++r) {
    for (std::size_t k = 0; k < n; ++k) {
      // Rotate the starting contender each round and reverse every other round.
      std::size_t i = (static_cast<std::size_t>(r) + k) % n;
      if (r % 2)
        i = n - 1 - i;
      auto t0 = std::chrono::steady_clock::now();
      (void)cs[i].module.forward(inputs);
      cs[i].ms.push_back(profiler::msSince(t0));
    }
  }

  auto ratio = [&](std::size_t base, std::size_t x) {
    std::vector<double> per_round;
    for (int r = 0; r < args.runs; ++r)
      per_round.push_back(cs[base].ms[static_cast<std::size_t>(r)] /
                          cs[x].ms[static_cast<std::size_t>(r)]);
    return profiler::summarize(std::move(per_round)).median_ms;
  };
  std::printf("threads %d (libtorch %d, BLAS %d), %d rounds, %zu contenders interleaved\n", threads,
              threads, blasThreads(), args.runs, n);
  std::printf("%-40s %10s %9s %11s %9s %10s\n", "model", "median ms", "IQR ms", "vs original",
              "vs peer", "max error");
  nlohmann::json out = {{"model", args.original},
                        {"threads", threads},
                        {"blas_threads", blasThreads()},
                        {"runs", args.runs},
                        {"contenders", nlohmann::json::array()}};
  for (std::size_t i = 0; i < n; ++i) {
    const auto s = profiler::summarize(cs[i].ms);
    const double vo = ratio(0, i), vp = ratio(1, i);
    std::printf("%-40s %10.3f %9.3f %10.3fx %8.3fx %10.2e\n", cs[i].name.c_str(), s.median_ms,
                s.iqr_ms, vo, vp, cs[i].error);
    out["contenders"].push_back(
        {{"name", cs[i].name},
         {"median_ms", s.median_ms},
         {"iqr_ms", s.iqr_ms},
         {"vs_original", vo},
         {"vs_peer", vp},
         {"max_error",
          std::isfinite(cs[i].error) ? nlohmann::json(cs[i].error) : nlohmann::json("inf")}});
  }
  if (!args.json_out.empty())
    writeFileAtomic(args.json_out, out.dump(1) + "\n");
  return kExitOk;
}

} // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"The original model, the peer (optimize_for_inference(freeze(m))) and rewrites of "
               "it, timed interleaved in one process.",
               "xbench-peer"};
  app.add_option("original", args.original, "the original model")->required();
  app.add_option("ours", args.ours, "rewritten models to compare");
  app.add_option("--runs", args.runs, "rounds (each runs every contender once)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", args.warmup, "untimed rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", args.threads,
                 "libtorch and BLAS threads, set together (default 1; at most the CPUs)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--peer-of-ours", args.peer_of_ours,
               "also time optimize_for_inference(freeze(ours)) for each rewrite");
  addModelInputFlags(app, {args.input_shapes, args.input_dtypes, args.input_ranges, args.input_file,
                           args.op_libraries});
  app.add_option("--json", args.json_out, "also write the table as JSON");
  if (auto code = parseCommandLine(app, argc, argv))
    return *code;
  return runGuarded("xbench-peer", [&] {
    runtime::loadOps();
    xalloc::tspass::routeModelWarnings();
    for (const auto& lib : args.op_libraries)
      loadOpLibrary(lib);
    return run(args);
  });
}
