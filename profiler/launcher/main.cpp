// xprof: the command users run. A profile the timing database already holds for exactly this
// invocation (see xalloc/profiler/launch.h) is written from there, without loading libtorch;
// everything else runs xprof-core, which sits beside this program, with the same arguments.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/math_libraries.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  namespace launch = xalloc::profiler::launch;
  const std::string core = xalloc::selfDir() + "/xprof-core";
  const launch::Invocation inv = launch::inspect(argc, argv, core);
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
  ::execv(core.c_str(), argv);
  std::fprintf(stderr, "xprof: error: cannot run %s: %s\n", core.c_str(), std::strerror(errno));
  return xalloc::kExitError;
}
