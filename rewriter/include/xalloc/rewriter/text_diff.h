// Line-based unified diff (Myers' O(ND) algorithm), in the format `git apply` and `patch` read.
// Used for TorchScript graph diffs and C++ source patches.
#pragma once

#include <string>
#include <vector>

namespace xalloc::rewriter {

/// Splits text into lines without their '\n' (a final newline does not make an empty line).
std::vector<std::string> splitLines(const std::string& text);

/// Unified diff of `before` and `after` with `context` lines around each change; "" when equal.
/// Headers are "--- <before_name>" and "+++ <after_name>". A last line without a newline is
/// followed by "\ No newline at end of file", as `diff -u` writes it.
std::string unifiedDiff(const std::string& before, const std::string& after,
                        const std::string& before_name, const std::string& after_name,
                        int context = 3);

} // namespace xalloc::rewriter
