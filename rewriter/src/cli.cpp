// xrewrite's flags and the checks that need no model (cli.h), for the front and xrewrite-core
// alike. No libtorch.
#include "xalloc/rewriter/cli.h"

#include <string>

#include <CLI/CLI.hpp>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/fusion_names.h"

namespace xalloc::rewriter {

std::optional<int> parseXrewriteCommandLine(int argc, char** argv, XrewriteOptions& o) {
  // Like clang tools, everything after `--` is compiler flags for the C++ sources.
  int own = argc;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      own = i;
      for (int j = i + 1; j < argc; ++j)
        o.compiler_args.push_back(argv[j]);
      break;
    }
  CLI::App app{"xrewrite: write a schedule back into a TorchScript model (conversions inserted "
               "or removed, regions laid out; outputs verified within the tolerance, bit for bit "
               "with --exact), or into C++ sources with Clang (--cpp: a "
               "unified diff, --in-place, --check, --export-fixes).",
               "xrewrite"};
  app.add_option("model", o.model, "TorchScript model to rewrite");
  app.add_option("-s,--schedule", o.schedule,
                 "schedule.json (default: the last schedule in the stdin stream)");
  app.add_option("-o,--output", o.output, "write the rewritten model here");
  app.add_option("--method", o.method,
                 "method to rewrite (default: the one the schedule was made for)");
  app.add_flag("--diff", o.diff, "print the graph before/after as a unified diff");
  app.add_flag("--check", o.check, "write nothing; exit 1 when the model needs changes, 0 if not");
  bool no_verify = false;
  app.add_flag("--no-verify", no_verify, "skip the output check");
  auto* tol = app.add_option("--tolerance", o.tolerance,
                             "how far outputs may move, element by element: |new - original| over "
                             "|original|, near zero over the 10th percentile of |original| (at "
                             "most 1e-2; default: the schedule's, else 1e-4); beyond it nothing "
                             "is written");
  app.add_flag("--exact", o.exact, "bit-identical outputs only")->excludes(tol);
  app.add_flag("--freeze", o.freeze,
               "freeze the model first, as torch.jit.freeze does (weights become constants, batch "
               "norms fold into convolutions; outputs checked within the tolerance)");
  app.add_option("--verify-runs", o.verify_runs, "example inputs to verify on")
      ->capture_default_str();
  addModelInputFlags(
      app, {o.input_shapes, o.input_dtypes, o.input_ranges, o.input_file, o.op_libraries});
  std::string form;
  app.add_option("--form", form,
                 "portable: only aten:: ops, async decisions run as sync; fast: async decisions "
                 "use xalloc::contiguous_async, sync ones xalloc::contiguous (load "
                 "libxalloc_runtime.so to run the model); default: the form the schedule was "
                 "planned for (xsched --form), else portable");
  app.add_option("--no-fusion", o.no_fusions,
                 "a fast-form fusion not to run after the regions (repeatable): " +
                     tspass::fusionNames());
  app.add_option("--show", o.show,
                 "print the schedule stored in a rewritten model (for --method, where "
                 "several methods were rewritten) and exit");
  app.add_flag("-q,--quiet", o.quiet, "only warnings and errors on stderr");
  app.add_option("--cpp", o.cpp_files,
                 "C++ sources to patch (compile flags from -p or after --); prints a unified "
                 "diff unless --in-place, --check or --export-fixes");
  app.add_option("-p", o.build_dir, "folder with compile_commands.json (C++ sources)");
  app.add_flag("-i,--in-place", o.in_place, "C++: write the patched sources (atomically)");
  app.add_option("--export-fixes", o.export_fixes,
                 "C++: write the edits as clang-apply-replacements YAML");
  app.add_option("--root", o.roots,
                 "C++: a folder whose files may be patched too (by default only files under the "
                 "current folder and the sources' folders are; repeatable)");
  if (auto code = parseCommandLine(app, own, argv))
    return code;
  o.verify = !no_verify;
  if (!form.empty()) {
    o.form = formats::fromString<formats::RewriteForm>(form);
    if (!o.form) {
      printError("xrewrite", "--form: '" + form + "' is neither 'portable' nor 'fast'");
      return kExitError;
    }
  }
  return std::nullopt;
}

void checkModelOptions(const XrewriteOptions& o) {
  if (o.model.empty())
    throw InputError("xrewrite", "no model: give the TorchScript file to rewrite");
  if (o.output.empty() && !o.check && !o.diff)
    throw InputError("xrewrite", "no output: give -o OUT.pt (or --check / --diff for a dry run)");
  if (!o.output.empty() && samePath(o.output, o.model))
    throw InputError(o.output, "-o names the input model; write to another file");
  checkOutputPath(o.output); // before minutes of work, not after
  if (o.verify_runs < 1)
    throw InputError("xrewrite", "--verify-runs must be at least 1");
  for (const std::string& f : o.no_fusions)
    if (!tspass::isFusionName(f))
      throw InputError("xrewrite", "--no-fusion '" + f + "': no such fusion (the fusions are " +
                                       tspass::fusionNames() + ")");
}

} // namespace xalloc::rewriter
