// xprof's flags (cli.h), for xprof-core and its launcher alike.
#include "xalloc/profiler/cli.h"

#include <CLI/CLI.hpp>

#include "xalloc/bytes.h"
#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/tool.h"

namespace xalloc::profiler {

void defineXprofOptions(CLI::App& app, XprofOptions& o) {
  ProfileOptions& p = o.profile;
  app.footer("A libtorch program instead: xprof run [options] -- ./prog args... (xprof run "
             "--help)");
  app.add_option("model", p.model, "TorchScript model file (torch.jit.save)")->required();
  app.add_option("-o,--output", o.output, "write profile.json here (default: stdout)");
  app.add_option("--method", p.method, "method to profile")->capture_default_str();
  addModelInputFlags(
      app, {o.input_shapes, o.input_dtypes, o.input_ranges, p.input_file, o.op_libraries});
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
  app.add_option(
      "--sweep-max-bytes", o.sweep_max,
      "largest layout of the sweep, e.g. 64M (default: 256M, or less on small machines)");
  app.add_option("--db", p.db_path, "timing database (default: ~/.cache/xalloc/timings.sqlite)");
  app.add_flag_callback(
      "--no-db", [&p] { p.use_db = false; },
      "measure everything; neither read nor write the timing database");
  app.add_option("--trace", p.trace_path, "also write a Chrome/Perfetto trace here");
  app.add_flag_callback(
      "--no-consumers", [&p] { p.measure_consumers = false; },
      "skip re-running consumers (faster, no savings)");
  app.add_option("--budget", p.budget_s,
                 "seconds the measurements may take (0: no limit); what is not timed by then is "
                 "left as it is, with a note, and timed by a later run")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--freeze", p.freeze,
               "profile the model frozen, as xrewrite --freeze writes it (weights become "
               "constants whose layout changes once, at rewrite time)");
  app.add_flag_callback(
      "--no-regions", [&p] { p.measure_regions = false; },
      "skip timing layout regions (channels-last, packed, blocked) of the frozen model");
  app.add_flag("-q,--quiet", o.quiet, "no summary line on stderr");
}

void defineXprofRunOptions(CLI::App& app, XprofRunOptions& o) {
  RunOptions& r = o.run;
  app.add_option("-o,--output", o.output, "write profile.json here (default: stdout)");
  app.add_option("--iterations", r.iterations, "calls measured per call site")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", r.warmup, "untimed runs before each isolated measurement")
      ->capture_default_str();
  app.add_option("--repeats", r.repeats, "repetitions of each isolated measurement")
      ->capture_default_str();
  app.add_flag_callback(
      "--no-consumers", [&r] { r.measure_consumers = false; },
      "skip re-running consumers (faster, no savings)");
  app.add_option("--base-dir", r.base_dir,
                 "write source paths relative to this folder (default: the current one)");
  app.add_option("-p,--build-dir", o.build_dir,
                 "compile_commands.json's folder: complete each call site's anchor with Clang "
                 "(expression text, function, ordinal) so schedules survive edits above it");
  app.add_option("--hook", r.hook, "the hook library (default: libxprof_hook.so beside xprof)");
  app.add_flag("-q,--quiet", o.quiet, "no summary line on stderr");
  app.footer("The program and its arguments follow the options (after --): xprof run -o "
             "profile.json -- ./prog --steps 10");
  app.prefix_command(); // everything from the program's name on is the program's
}

void takeProgram(CLI::App& app, XprofRunOptions& o) {
  o.run.command = app.remaining();
  // An option xprof run does not have, before the program: a mistake, not the program's name
  // (`xprof run --no-db -- ./prog` ran a program called --no-db).
  if (!o.run.command.empty() && o.run.command.front() != "--" && o.run.command.front().size() > 1 &&
      o.run.command.front()[0] == '-')
    throw InputError("xprof run", "unknown option '" + o.run.command.front() +
                                      "' (xprof run's options come before the program; see "
                                      "xprof run --help)");
  if (!o.run.command.empty() && o.run.command.front() == "--")
    o.run.command.erase(o.run.command.begin());
  o.run.program_stdout_to_stderr = o.output.empty() || o.output == "-";
}

std::optional<int> parseXprofCommandLine(int argc, char** argv, XprofOptions& o) {
  CLI::App app{"xprof: profile a TorchScript model: each tensor's layout and consumers, per-op "
               "times, and what .contiguous() costs and saves, measured.",
               "xprof"};
  defineXprofOptions(app, o);
  return parseCommandLine(app, argc, argv);
}

std::optional<int> parseXprofRunCommandLine(int argc, char** argv, XprofRunOptions& o) {
  CLI::App app{"xprof run: profile an unmodified libtorch program (built with -g): each op it "
               "calls, at its call site in your sources, with the same facts as for a "
               "TorchScript model.",
               "xprof run"};
  defineXprofRunOptions(app, o);
  if (auto code = parseCommandLine(app, argc - 1, argv + 1))
    return code;
  const int code = runGuarded("xprof", [&] {
    takeProgram(app, o);
    return static_cast<int>(kExitOk);
  });
  if (code != kExitOk)
    return code;
  return std::nullopt;
}

void checkXprofOptions(XprofOptions& o) {
  if (o.profile.model.empty())
    throw InputError("xprof", "no model: give a TorchScript file (xprof MODEL.pt)");
  if (!o.sweep_max.empty()) {
    const auto bytes = parseByteSize(o.sweep_max);
    if (!bytes || *bytes < 4096)
      throw InputError("xprof", "--sweep-max-bytes: cannot read '" + o.sweep_max +
                                    "' as a size of at least 4K");
    o.profile.sweep_max_bytes = *bytes;
  }
  checkOutputPath(o.output); // before the profile's minutes, not after
}

} // namespace xalloc::profiler
