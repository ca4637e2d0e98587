// mathLibraries: libtorch_cpu (the wheel's MKL and oneDNN are inside it) and the BLAS / LAPACK /
// oneDNN files this process resolved.
#include "xalloc/math_libraries.h"

#include <algorithm>
#include <string>

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>

namespace xalloc {

namespace {
// "path@bytes" of a file, or "" when it does not exist.
std::string withSize(const std::string& file) {
  char real[PATH_MAX];
  std::string path = ::realpath(file.c_str(), real) != nullptr ? real : file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "";
  return path + "@" + std::to_string(st.st_size);
}
} // namespace

std::string mathLibraries() {
  // The libtorch every tool links (its RPATH's, known when it was built): its kernels, its MKL
  // and its oneDNN are one file, whichever process asks (the launcher links no libtorch).
  std::string out = withSize(std::string(XALLOC_TORCH_LIB_DIR) + "/libtorch_cpu.so");
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
    std::string path = withSize(map->l_name);
    if (path.empty())
      path = map->l_name;
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
    std::string path = libraryPath(entry);
    const std::size_t slash = path.rfind('/');
    if (slash != std::string::npos && slash >= 5 && path.compare(slash - 5, 5, "/blas") == 0 &&
        path.compare(slash + 1, 11, "libblas.so.") == 0)
      return path;
  }
  return "";
}

} // namespace xalloc
