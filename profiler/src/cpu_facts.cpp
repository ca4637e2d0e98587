// The CPU's facts from /proc/cpuinfo and sysfs; no libtorch (xprof's launcher keys its answers by
// them too). The CPUs the process may use: xalloc::availableCpus (common/threads.h).
#include "xalloc/profiler/device_info.h"

#include <fstream>
#include <string>

namespace xalloc::profiler {

std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "cpu";
}

namespace {

// Size in bytes of the cache at `level` of `type` ("Data"/"Unified") from sysfs; 0 if unknown.
std::int64_t cacheSize(int level, bool data) {
  for (int i = 0; i < 8; ++i) {
    std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(base + "level"), ty(base + "type"), sz(base + "size");
    int l = 0;
    std::string t, s;
    if (!(lv >> l) || !(ty >> t) || !(sz >> s))
      continue;
    if (l != level || (data ? (t != "Data" && t != "Unified") : t != "Unified"))
      continue;
    std::int64_t v = std::stoll(s);
    char unit = s.empty() ? 'B' : s.back();
    if (unit == 'K')
      v *= 1024;
    else if (unit == 'M')
      v *= 1024 * 1024;
    return v;
  }
  return 0;
}

} // namespace

formats::CacheInfo cpuCaches() {
  formats::CacheInfo c;
  c.l1d_bytes = cacheSize(1, true);
  c.l2_bytes = cacheSize(2, false);
  c.l3_bytes = cacheSize(3, false);
  return c;
}

} // namespace xalloc::profiler
