// Warnings a model raises while it runs (`warnings.warn` in its source, or a deprecation inside
// an op), shown once per message in the tools' own format instead of once per run through glog.
#pragma once

#include <string>

namespace xalloc::tspass {

/// Prints "warning: the model warns: MSG" on stderr, the first time for each message.
void reportModelWarning(const std::string& msg);

/// Routes libtorch's warnings (c10::Warning, which the JIT interpreter raises for aten::warn)
/// through reportModelWarning for the rest of the process.
void routeModelWarnings();

} // namespace xalloc::tspass
