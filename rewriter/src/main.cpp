// xrewrite-core's command line (cli.h) into runXrewrite: what xrewrite's front hands over, a
// TorchScript model to rewrite or a stored schedule to show.
#include "xalloc/rewriter/cli.h"
#include "xalloc/rewriter/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  xalloc::rewriter::XrewriteOptions o;
  if (auto code = xalloc::rewriter::parseXrewriteCommandLine(argc, argv, o))
    return *code;
  return xalloc::runGuarded("xrewrite", [&] { return xalloc::rewriter::runXrewrite(o); });
}
