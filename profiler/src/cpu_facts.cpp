// The CPU's facts from /proc/cpuinfo, sysfs and the affinity mask; no libtorch (xprof's launcher
// keys its answers by them too).
#include "xalloc/profiler/device_info.h"

#include <algorithm>
#include <dlfcn.h>
#include <fstream>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace xalloc::profiler {

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

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

std::string mathLibraries() {
  std::string out;
  for (const char* name : {"libblas.so.3", "liblapack.so.3", "libdnnl.so.2"}) {
    // Already loaded (xprof-core, through libtorch), or loaded here the way libtorch would find
    // it (the launcher); left loaded, as a BLAS's own threads may not survive an unload.
    void* h = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr)
      h = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    struct link_map* map = nullptr;
    if (h == nullptr || ::dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
        map->l_name == nullptr)
      continue;
    char real[PATH_MAX];
    std::string path = ::realpath(map->l_name, real) != nullptr ? real : map->l_name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0)
      path += "@" + std::to_string(st.st_size);
    out += (out.empty() ? "" : ";") + path;
  }
  return out;
}

std::vector<std::string> splitLibraries(const std::string& libraries) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start < libraries.size();) {
    const std::size_t end = std::min(libraries.find(';', start), libraries.size());
    out.push_back(libraries.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string libraryPath(const std::string& entry) {
  return entry.substr(0, entry.rfind('@'));
}

std::string referenceBlas(const std::string& libraries) {
  for (const auto& entry : splitLibraries(libraries)) {
    const std::string path = libraryPath(entry);
    const std::size_t slash = path.rfind('/');
    if (slash != std::string::npos && slash >= 5 && path.compare(slash - 5, 5, "/blas") == 0 &&
        path.compare(slash + 1, 11, "libblas.so.") == 0)
      return path;
  }
  return "";
}

} // namespace xalloc::profiler
