// xrewrite as a function: options in a plain struct, an exit code out (see main.cpp for flags).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xalloc/formats/enums.h"

namespace xalloc::rewriter {

struct XrewriteOptions {
  std::string model;    // TorchScript file to rewrite
  std::string schedule; // schedule.json; "" or "-" = the stream on stdin
  std::string output;   // rewritten model; may be empty with --diff or --check
  std::string method;   // empty: the schedule's method (forward when it names none)
  bool diff = false;    // print the graph before/after as a unified diff on stdout
  bool check = false;   // write nothing; exit 1 when the model needs changes
  bool verify = true;   // compare outputs of the original and the rewritten model
  int verify_runs = 3;
  /// How far the rewritten model's outputs may move: max |new - original| over max |original|,
  /// per output. None: the schedule's (xsched --tolerance), else formats::kDefaultTolerance.
  std::optional<double> tolerance;
  bool exact = false; // bit-identical outputs only (a tolerance of 0)
  /// Freeze the model first, as torch.jit.freeze does (weights become constants, batch norms
  /// fold into convolutions), then apply the schedule.
  bool freeze = false;
  /// "portable": only aten:: ops (async decisions become sync); "fast": async decisions use
  /// xalloc::contiguous_async + aten::wait (the model then needs libxalloc_runtime.so loaded).
  /// None: the form the schedule was planned for (xsched --form), else portable.
  std::optional<formats::RewriteForm> form;
  /// Fusions not to run after the fast form's regions (--no-fusion; names as tspass/fusions.h
  /// lists them).
  std::vector<std::string> no_fusions;
  std::string show; // print the schedule stored in this rewritten model and exit
  std::vector<std::string> input_shapes, input_dtypes, input_ranges;
  std::string input_file; // verify on these inputs (torch.save of a tensor, tuple or list)
  bool quiet = false;
  std::vector<std::string> op_libraries; // --load-library, loaded before the model
  // C++ sources (Clang): the files to patch, the compilation database folder (-p) or the
  // compiler flags after `--`, and what to do with the patch.
  std::vector<std::string> cpp_files;
  std::string build_dir;
  std::vector<std::string> compiler_args;
  bool in_place = false;
  std::string export_fixes;
  /// Folders whose files may be patched besides the current folder and the sources' own
  /// (--root): a header elsewhere that an anchor's file name matches is skipped, with a warning.
  std::vector<std::string> roots;
};

int runXrewrite(const XrewriteOptions& options);

} // namespace xalloc::rewriter
