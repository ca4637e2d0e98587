// Helpers the allocator stages share: byte counts for people, and a monotonic clock in ms.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace xalloc::runtime::detail {

inline std::string bytesText(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

inline double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace xalloc::runtime::detail
