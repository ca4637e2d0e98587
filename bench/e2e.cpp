// xbench-e2e: one model against its rewrites under several policies, side by side in one run.
// Every run executes all variants in a rotating order (A B C D, B C D A, ...) after a warm-up, so
// drift and cache effects hit all alike; prints medians, interquartile ranges and ratios to the
// original, checks every variant is bit-identical to the original, and appends the raw samples
// to a JSON Lines file.
//
// Usage: xbench-e2e --name NAME ORIGINAL.pt LABEL=VARIANT.pt... [--runs N] [--warmup N]
//                   [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>

#include "xalloc/error.h"
#include "xalloc/runtime/async.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/value_compare.h"

using namespace xalloc;

namespace {

struct Variant {
  std::string label, path;
  tspass::LoadedModel model;
  std::vector<double> ms;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int run(const std::string& name, std::vector<Variant>& vs, int runs, int warmup,
        const std::string& json_path) {
  if (runs < 30)
    throw InputError("xbench-e2e", "--runs must be at least 30 for a stable median");
  auto specs = xalloc::tspass::specFromExtraFiles(vs[0].model.extra_files, vs[0].path);
  if (specs.empty())
    throw InputError(vs[0].path, "no example inputs stored in the model");
  auto inputs = xalloc::tspass::methodInputs(vs[0].model.module, "forward",
                                             xalloc::tspass::makeInputs(specs, 0), vs[0].path);
  inputs.erase(inputs.begin());
  const c10::IValue reference = vs[0].model.module.forward(inputs);
  for (auto& v : vs)
    if (!xalloc::tspass::bitwiseEqual(reference, v.model.module.forward(inputs)))
      throw InputError(v.path, "outputs differ from the original");
  for (int w = 0; w < warmup; ++w)
    for (auto& v : vs)
      (void)v.model.module.forward(inputs);
  for (int r = 0; r < runs; ++r)
    for (std::size_t k = 0; k < vs.size(); ++k) {
      Variant& v = vs[(k + static_cast<std::size_t>(r)) % vs.size()];
      const auto t0 = std::chrono::steady_clock::now();
      (void)v.model.module.forward(inputs);
      v.ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  const double base = quantile(vs[0].ms, 0.5);
  std::printf("%-12s %-22s %10s %10s %9s\n", name.c_str(), "variant", "median ms", "IQR ms",
              "speedup");
  nlohmann::json rec{{"model", name}, {"runs", runs}, {"variants", nlohmann::json::array()}};
  for (const auto& v : vs) {
    const double med = quantile(v.ms, 0.5);
    std::printf("%-12s %-22s %10.3f %10.3f %8.3fx\n", "", v.label.c_str(), med,
                quantile(v.ms, 0.75) - quantile(v.ms, 0.25), base / med);
    rec["variants"].push_back({{"label", v.label},
                               {"path", v.path},
                               {"median_ms", med},
                               {"speedup", base / med},
                               {"samples_ms", v.ms}});
  }
  std::printf("%-12s outputs of every variant bit-identical to the original\n", "");
  if (!json_path.empty()) {
    std::ofstream out(json_path, std::ios::app);
    out << rec.dump() << "\n";
  }
  return kExitOk;
}

} // namespace

int main(int argc, char** argv) {
  runtime::loadOps(); // fast rewrites use xalloc:: ops
  std::string name = "model", json, original;
  std::vector<std::string> variants;
  int runs = 50, warmup = 5;
  CLI::App app{"Original and rewritten variants of one model, timed interleaved.", "xbench-e2e"};
  app.add_option("--name", name, "the model's name in the report");
  app.add_option("--runs", runs, "timed rounds")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--json", json, "also write the results here");
  app.add_option("original", original, "ORIGINAL.pt")->required();
  app.add_option("variants", variants, "LABEL=VARIANT.pt ...")->required();
  if (auto code = parseCommandLine(app, argc, argv))
    return *code;
  std::vector<Variant> vs{{"original", original, {}, {}}};
  for (const auto& v : variants) {
    const auto eq = v.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "xbench-e2e: error: '%s' is not LABEL=VARIANT.pt\n", v.c_str());
      return kExitError;
    }
    vs.push_back({v.substr(0, eq), v.substr(eq + 1), {}, {}});
  }
  return runGuarded("xbench-e2e", [&] {
    for (auto& v : vs)
      v.model = tspass::loadModel(v.path);
    return run(name, vs, runs, warmup, json);
  });
}
