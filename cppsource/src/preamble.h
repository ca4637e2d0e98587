// The precompiled preamble of a parse (parse.cpp): a file's leading system includes, when they
// include libtorch (`#include <torch/torch.h>`: most of a libtorch program's parse), compiled
// once per compile command into a PCH kept in a cache folder, which later parses of any file
// with the same preamble and flags load instead of parsing the headers again (the tests' mixer:
// xrewrite --cpp 9.7 s, 3.0 s with its preamble loaded; 12 s the run that builds it). xprof run
// -p and xrewrite --cpp parse each file again on every run (a pre-commit hook: every commit).
//
// The folder: XALLOC_PCH_DIR, else $XDG_CACHE_HOME/xalloc/pch, else ~/.cache/xalloc/pch; at most
// XALLOC_PCH_CACHE_MB MiB (default 1024) of PCHs, the least recently used removed first.
// XALLOC_PCH=0 turns it off. A preamble's PCH is built the second time it is parsed (building
// costs more than one parse). A folder that cannot be written leaves every parse as it was.
// Clang checks a PCH's headers (size and time) when it loads it: a header changed since gives
// an error there, and the caller parses without it (and drops it: the next parse builds it again).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace clang::tooling {
struct CompileCommand;
}

namespace xalloc::cppsource {

/// The text of `content`'s preamble: its leading lines that are blank, `//` comments or
/// `#include <...>`, up to the last such include; when the line after them includes a header of
/// the program's own found in `folder` (`#include "minigpt.h"`), that header's own leading
/// system includes after them. Empty when none of those includes is libtorch's (`<torch/...>`,
/// `<ATen/...>`, `<c10/...>`).
std::string preambleOf(const std::string& content, const std::string& folder);

/// The PCH of `content`'s preamble (`folder`: the file's own) under `cmd`'s flags (`extra`
/// appended, as the parse appends them), built the second time a preamble is asked for (the first
/// only marks it seen); nullopt when there is none yet, the file has no preamble, the cache is off
/// or cannot be written, or the PCH does not build.
std::optional<std::string> preamblePch(const std::string& content, const std::string& folder,
                                       const clang::tooling::CompileCommand& cmd,
                                       const std::vector<std::string>& extra);

/// Drops a PCH that failed to load (a header changed since it was built).
void forgetPch(const std::string& pch);

} // namespace xalloc::cppsource
