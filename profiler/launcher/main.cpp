// xprof: the command users run. Its command line is answered here without loading libtorch
// (--help, --version, usage errors, options wrong without a model), and so is a profile the
// timing database already holds for exactly this invocation (see xalloc/profiler/launch.h);
// everything else runs xprof-core, which sits beside this program, with the same arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/math_libraries.h"
#include "xalloc/profiler/cli.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  namespace launch = xalloc::profiler::launch;
  namespace prof = xalloc::profiler;
  const std::string core = xalloc::selfDir() + "/xprof-core";
  // The command line first, parsed as xprof-core parses it: --help, --version, a usage error and
  // an option that needs no model to be wrong are answered here, without libtorch. A program's
  // profile (`xprof run`) is never answered from the database.
  launch::Invocation inv;
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    prof::XprofRunOptions o;
    if (auto code = prof::parseXprofRunCommandLine(argc, argv, o))
      return *code;
  } else {
    prof::XprofOptions o;
    if (auto code = prof::parseXprofCommandLine(argc, argv, o))
      return *code;
    if (const int code = xalloc::runGuarded("xprof",
                                            [&] {
                                              prof::checkXprofOptions(o);
                                              return static_cast<int>(xalloc::kExitOk);
                                            });
        code != xalloc::kExitOk)
      return code;
    inv = launch::inspect(o, core);
  }
  ::unsetenv(launch::kKeyEnv);
  if (inv.memoizable) {
    if (auto hit = launch::lookup(inv.db_path, inv.key)) {
      return xalloc::runGuarded("xprof", [&] {
        xalloc::formats::emitDocument(inv.output, {}, xalloc::formats::toJson(*hit));
        if (!inv.quiet && !inv.output.empty() && inv.output != "-")
          std::fprintf(stderr, "%s -> %s\n", launch::summaryLine(*hit).c_str(), inv.output.c_str());
        if (const std::string note = launch::referenceBlasNote(*hit); !inv.quiet && !note.empty())
          xalloc::printNote(hit->model.path, note);
        if (const std::string note = launch::freezeNote(*hit); !inv.quiet && !note.empty())
          xalloc::printNote(hit->model.path, note);
        return xalloc::kExitOk;
      });
    }
    ::setenv(launch::kKeyEnv, inv.key.c_str(), 1);
  }
  return xalloc::execBeside("xprof", "xprof-core", argv);
}
