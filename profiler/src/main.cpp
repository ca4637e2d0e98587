// xprof command line: parses flags into XprofOptions and calls runXprof.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/model_warnings.h"
#include "xalloc/profiler/run_program.h"
#include "xalloc/profiler/tool.h"
#include "xalloc/rewriter/cpp_rewrite.h"
#include "xalloc/scheduler/tool.h"
#include "xalloc/tool.h"

namespace {

// Anchors of a program's call sites from debug info carry a position only; Clang reads the
// expression there from the translation units that hold them.
void completeAnchors(xalloc::formats::Profile& p, const std::string& build_dir,
                     const std::string& base_dir, bool quiet) {
  namespace fs = std::filesystem;
  const fs::path base = base_dir.empty() ? fs::current_path() : fs::path(base_dir);
  std::vector<xalloc::formats::Anchor*> open;
  std::set<std::string> units;
  for (auto& op : p.ops)
    if (!op.anchor.file.empty() && op.anchor.expr.empty()) {
      open.push_back(&op.anchor);
      const std::string ext = std::filesystem::path(op.anchor.file).extension().string();
      if (ext != ".h" && ext != ".hpp" && ext != ".hh" && ext != ".hxx" && ext != ".inl")
        units.insert(fs::path(op.anchor.file).is_absolute()
                         ? op.anchor.file
                         : (base / op.anchor.file).lexically_normal().string());
    }
  const std::size_t n =
      xalloc::rewriter::resolveAnchors(open, {units.begin(), units.end()}, build_dir, {});
  if (!quiet)
    std::fprintf(stderr, "xprof: %zu of %zu call sites matched to an expression by Clang\n", n,
                 open.size());
}

// `xprof run [options] -- ./prog args...`: an unmodified libtorch program.
int runMain(int argc, char** argv) {
  xalloc::profiler::RunOptions r;
  std::string output;
  bool quiet = false, no_consumers = false;
  CLI::App app{"xprof run: profile an unmodified libtorch program (built with -g): each op it "
               "calls, at its call site in your sources, with the same facts as for a "
               "TorchScript model.",
               "xprof run"};
  app.add_option("-o,--output", output, "write profile.json here (default: stdout)");
  app.add_option("--iterations", r.iterations, "calls measured per call site")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", r.warmup, "untimed runs before each isolated measurement")
      ->capture_default_str();
  app.add_option("--repeats", r.repeats, "repetitions of each isolated measurement")
      ->capture_default_str();
  app.add_flag("--no-consumers", no_consumers, "skip re-running consumers (faster, no savings)");
  app.add_option("--base-dir", r.base_dir,
                 "write source paths relative to this folder (default: the current one)");
  std::string build_dir;
  app.add_option("-p,--build-dir", build_dir,
                 "compile_commands.json's folder: complete each call site's anchor with Clang "
                 "(expression text, function, ordinal) so schedules survive edits above it");
  app.add_option("--hook", r.hook, "the hook library (default: libxprof_hook.so beside xprof)");
  app.add_flag("-q,--quiet", quiet, "no summary line on stderr");
  app.footer("The program and its arguments follow the options (after --): xprof run -o "
             "profile.json -- ./prog --steps 10");
  app.prefix_command(); // everything from the program's name on is the program's
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  r.command = app.remaining();
  if (!r.command.empty() && r.command.front() == "--")
    r.command.erase(r.command.begin());
  r.measure_consumers = !no_consumers;
  r.program_stdout_to_stderr = output.empty() || output == "-";
  return xalloc::runGuarded("xprof", [&] {
    auto p = xalloc::profiler::profileProgram(r);
    if (!build_dir.empty())
      completeAnchors(p, build_dir, r.base_dir, quiet);
    xalloc::emitDocument(output, {}, xalloc::formats::toJson(p));
    if (!quiet && !output.empty() && output != "-") {
      std::size_t noncontig = 0, located = 0;
      for (const auto& v : p.records)
        noncontig += !v.contiguous;
      for (const auto& op : p.ops)
        located += op.source.known();
      std::fprintf(stderr,
                   "xprof: %zu call sites (%zu in your sources), %zu tensor values (%zu "
                   "non-contiguous), %zu layouts measured, %zu idle windows -> %s\n",
                   p.ops.size(), located, p.records.size(), noncontig,
                   p.conversion_cost_table.size(), p.gpu_idle_events.size(), output.c_str());
    }
    return xalloc::kExitOk;
  });
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "run")
    return runMain(argc - 1, argv + 1);
  xalloc::profiler::XprofOptions o;
  auto& p = o.profile;
  CLI::App app{"xprof: profile a TorchScript model: each tensor's layout and consumers, per-op "
               "times, and what .contiguous() costs and saves, measured.",
               "xprof"};
  app.footer("A libtorch program instead: xprof run [options] -- ./prog args... (xprof run "
             "--help)");
  app.add_option("model", p.model, "TorchScript model file (torch.jit.save)")->required();
  app.add_option("-o,--output", o.output, "write profile.json here (default: stdout)");
  app.add_option("--method", p.method, "method to profile")->capture_default_str();
  std::vector<std::string> op_libraries;
  app.add_option("--load-library", op_libraries,
                 "a library of custom ops the model calls (torchvision's _C*.so, your own "
                 "TORCH_LIBRARY ops), loaded before the model; repeatable");
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
  return xalloc::runGuarded("xprof", [&] {
    xalloc::profiler::routeModelWarnings();
    for (const auto& lib : op_libraries)
      xalloc::loadOpLibrary(lib);
    return xalloc::profiler::runXprof(o);
  });
}
