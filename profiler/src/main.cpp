// xprof-core's command line: parses the flags (cli.h) into options and calls runXprof, or, for
// `xprof run`, runXprofRun.
#include <string>

#include "xalloc/profiler/cli.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  using namespace xalloc::profiler;
  if (argc > 1 && std::string(argv[1]) == "run") {
    XprofRunOptions o;
    if (auto code = parseXprofRunCommandLine(argc, argv, o))
      return *code;
    return xalloc::runGuarded("xprof", [&] { return runXprofRun(o); });
  }
  XprofOptions o;
  if (auto code = parseXprofCommandLine(argc, argv, o))
    return *code;
  // --budget is what the user waits for: the process's start (`xprof` execs xprof-core), loading
  // libtorch and the tools' libraries, counts.
  o.profile.spent_before_ms = processAgeMs();
  return xalloc::runGuarded("xprof", [&] { return runXprof(o); });
}
