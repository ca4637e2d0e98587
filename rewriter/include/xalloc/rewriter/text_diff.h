// Line-based unified diff (Myers' O(ND) algorithm), in the format `git apply` and `patch` read.
// Used for TorchScript graph diffs now and for C++ source patches later.
#pragma once

#include <string>
#include <vector>

namespace xalloc::rewriter {

/// Splits text into lines without their '\n' (a final newline does not make an empty line).
std::vector<std::string> splitLines(const std::string& text);

/// Unified diff of `before` and `after` with `context` lines around each change; "" when equal.
/// Headers are "--- <before_name>" and "+++ <after_name>".
std::string unifiedDiff(const std::string& before, const std::string& after,
                        const std::string& before_name, const std::string& after_name,
                        int context = 3);

} // namespace xalloc::rewriter
