// The output side of xrewrite --cpp: the edits as Clang's Replacements (overlaps are errors),
// applied to each file's text, and clang-apply-replacements' YAML (--export-fixes).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/Error.h>

#include "xalloc/rewriter/cpp_rewrite.h"

namespace xalloc::rewriter {

/// The edits as Clang's Replacements, one set per file, in which overlapping edits are an error.
llvm::Expected<std::map<std::string, clang::tooling::Replacements>>
toReplacements(const std::vector<CppEdit>& edits);

/// Fills `out.before` and `out.after` with each edited file's text and its text with the edits
/// applied (every decision's edits were checked as they were made).
void applyEdits(CppRewrite& out);

} // namespace xalloc::rewriter
