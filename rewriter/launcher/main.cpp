// xrewrite: the command users run. It parses the command line itself and answers, without
// loading libtorch (most of a second here): --help, --version, a usage error, a bad option of a
// TorchScript rewrite, and every C++ rewrite (--cpp: Clang only), which a pre-commit hook runs
// on each commit. A TorchScript model, a stored schedule (--show) and --load-library go to
// xrewrite-core, beside this program, with the same arguments; it parses and checks them again.
#include "xalloc/error.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/io.h"
#include "xalloc/rewriter/cli.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  namespace rw = xalloc::rewriter;
  rw::XrewriteOptions o;
  if (auto code = rw::parseXrewriteCommandLine(argc, argv, o))
    return *code;
  if (o.show.empty() && o.op_libraries.empty()) {
    // The checks xrewrite-core makes first, in its order; a C++ rewrite is all done here.
    const bool cpp = !o.cpp_files.empty();
    const int code = xalloc::runGuarded("xrewrite", [&]() -> int {
      xalloc::formats::checkToleranceFlags(o.tolerance, o.exact, "xrewrite");
      if (cpp)
        return rw::runXrewriteCpp(o);
      rw::checkModelOptions(o);
      return xalloc::kExitOk;
    });
    if (cpp || code != xalloc::kExitOk)
      return code;
  }
  return xalloc::execBeside("xrewrite", "xrewrite-core", argv);
}
