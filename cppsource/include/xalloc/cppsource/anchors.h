// Source anchors for C++ programs: what `xprof run -p` uses to turn a call site's file:line:col
// (from debug info) into an anchor that survives edits above it, and what xrewrite --cpp matches.
// No Clang header is included here: the parsing happens in the library (xalloc::cppsource).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "xalloc/formats/types.h"

namespace xalloc::cppsource {

/// Completes anchors that carry only a position (`xprof run` reads file:line:col from debug
/// info) with what makes them survive edits above the site: the expression's text, its
/// enclosing function as Clang names it, and its ordinal among equal texts there. Parses
/// `files` (and the user headers they include); an anchor whose position holds no call of type
/// at::Tensor is left as it is. Returns how many were completed.
std::size_t resolveAnchors(const std::vector<formats::Anchor*>& anchors,
                           const std::vector<std::string>& files, const std::string& build_dir,
                           const std::vector<std::string>& fixed_args);

} // namespace xalloc::cppsource
