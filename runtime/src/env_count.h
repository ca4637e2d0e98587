// The runtime's numeric XALLOC_* variables, read one way: a whole number in [lo, hi], or an
// error in one line naming the variable, the value and the range (c10::Error, which Python sees
// as RuntimeError). An unset or empty variable gives the default. "abc", "-1", "8x" or a value
// out of range is never quietly read as something else.
#pragma once

#include <cstddef>

namespace xalloc::runtime {

std::size_t envCount(const char* name, std::size_t fallback, std::size_t lo, std::size_t hi,
                     const char* what);

} // namespace xalloc::runtime
