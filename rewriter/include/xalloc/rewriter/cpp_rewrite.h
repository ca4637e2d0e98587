// Writing a schedule back into C++ sources with Clang LibTooling (clang 14). Decisions are
// matched to expressions by their source anchor: the file, the enclosing function, the
// expression's text (whitespace-normalised) and its ordinal among equal texts in that function
// in source order; line and column only break ties. Only expressions of type at::Tensor (also
// through torch:: aliases) are edited; expressions written by macros or inside templates are
// reported and skipped, never guessed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "xalloc/formats/schedule.h"

namespace xalloc::rewriter {

struct CppEdit {
  std::string file; // absolute path
  unsigned offset = 0;
  unsigned length = 0;
  std::string text;
  std::size_t decision = 0; // the schedule's decision (index) that made it
};

struct CppNote {
  std::string location; // file:line:col
  std::string message;
  bool warning = false;
};

struct CppRewrite {
  std::vector<CppEdit> edits;
  std::map<std::string, std::string> before, after; // by absolute path, files that change
  std::vector<CppNote> notes;
  std::size_t applied = 0, already = 0, skipped = 0, not_found = 0;
  std::size_t matched = 0;   // decisions (not `none`) whose file was among the sources
  std::size_t unreached = 0; // decisions (not `none`) for files no parse reached
};

/// Runs Clang over `files` (compile commands from `build_dir`'s compile_commands.json, or, when
/// `fixed_args` is not empty, those flags for every file) and computes the edits. With
/// `async_calls` (xrewrite --form fast), an async decision on `auto v = EXPR;` becomes
/// `auto v = xalloc::runtime::contiguousAsync(EXPR);` and every later use of v `v.wait()`;
/// otherwise async decisions are written as sync. Throws InputError when a file cannot be read
/// or parsed.
CppRewrite rewriteCpp(const formats::Schedule& schedule, const std::vector<std::string>& files,
                      const std::string& build_dir, const std::vector<std::string>& fixed_args,
                      bool async_calls = false);

/// The edits as clang-apply-replacements YAML.
std::string exportFixesYaml(const CppRewrite& r);

} // namespace xalloc::rewriter
