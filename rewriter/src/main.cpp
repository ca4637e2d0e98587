// xrewrite command line: parses flags into XrewriteOptions and calls runXrewrite.
#include <CLI/CLI.hpp>

#include "xalloc/rewriter/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  xalloc::rewriter::XrewriteOptions o;
  CLI::App app{"xrewrite: write a schedule back into a TorchScript model (sync conversions "
               "inserted, useless ones removed), verified bit-identical.",
               "xrewrite"};
  app.add_option("model", o.model, "TorchScript model to rewrite");
  app.add_option("-s,--schedule", o.schedule,
                 "schedule.json (default: the last schedule in the stdin stream)");
  app.add_option("-o,--output", o.output, "write the rewritten model here");
  app.add_option("--method", o.method, "method to rewrite")->capture_default_str();
  app.add_flag("--diff", o.diff, "print the graph before/after as a unified diff");
  app.add_flag("--check", o.check, "write nothing; exit 1 when the model needs changes, 0 if not");
  bool no_verify = false;
  app.add_flag("--no-verify", no_verify, "skip the bit-identical output check");
  app.add_option("--verify-runs", o.verify_runs, "example inputs to verify on")
      ->capture_default_str();
  app.add_option("--input-shape", o.input_shapes,
                 "example input shape for verification, e.g. 4x64");
  app.add_option("--input-dtype", o.input_dtypes, "example input dtype");
  app.add_option("--input-range", o.input_ranges, "example input LOW:HIGH");
  app.add_option("--form", o.form,
                 "portable: only aten:: ops, async decisions run as sync; fast: async decisions "
                 "use xalloc::contiguous_async (load libxalloc_runtime.so to run the model)")
      ->capture_default_str();
  app.add_option("--show", o.show, "print the schedule stored in a rewritten model and exit");
  app.add_flag("-q,--quiet", o.quiet, "only warnings and errors on stderr");
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  o.verify = !no_verify;
  return xalloc::runGuarded("xrewrite", [&] { return xalloc::rewriter::runXrewrite(o); });
}
