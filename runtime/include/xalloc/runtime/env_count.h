// The runtime's numeric XALLOC_* variables, read one way: a whole number in [lo, hi], or an
// error in one line naming the variable, the value and the range (c10::Error, which Python sees
// as RuntimeError). An unset or empty variable gives the default. "abc", "-1", "8x" or a value
// out of range is never quietly read as something else.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdlib>

#include <c10/util/Exception.h>

namespace xalloc::runtime {

inline std::size_t envCount(const char* name, std::size_t fallback, std::size_t lo, std::size_t hi,
                            const char* what) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  TORCH_CHECK(*v != '-' && *v != '+' && *v != ' ' && *end == '\0' && errno == 0 && n >= lo &&
                  n <= hi,
              name, "=", v, ": expected a whole number of ", what, " from ", lo, " to ", hi);
  return static_cast<std::size_t>(n);
}

} // namespace xalloc::runtime
