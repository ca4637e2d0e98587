// xprof-core's command line: parses the flags (cli.h) into options and calls runXprof, or, for
// `xprof run`, runXprofRun.
#include <string>

#include <CLI/CLI.hpp>

#include "xalloc/profiler/cli.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  using namespace xalloc::profiler;
  if (argc > 1 && std::string(argv[1]) == "run") {
    XprofRunOptions o;
    CLI::App app{"xprof run: profile an unmodified libtorch program (built with -g): each op it "
                 "calls, at its call site in your sources, with the same facts as for a "
                 "TorchScript model.",
                 "xprof run"};
    defineXprofRunOptions(app, o);
    if (auto code = xalloc::parseCommandLine(app, argc - 1, argv + 1))
      return *code;
    return xalloc::runGuarded("xprof", [&] {
      takeProgram(app, o);
      return runXprofRun(o);
    });
  }
  XprofOptions o;
  CLI::App app{"xprof: profile a TorchScript model: each tensor's layout and consumers, per-op "
               "times, and what .contiguous() costs and saves, measured.",
               "xprof"};
  defineXprofOptions(app, o);
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  // --budget is what the user waits for: the process's start (`xprof` execs xprof-core), loading
  // libtorch and the tools' libraries, counts.
  o.profile.spent_before_ms = processAgeMs();
  return xalloc::runGuarded("xprof", [&] { return runXprof(o); });
}
