// loadOpLibrary: dlopen a library of custom ops with its symbols global.
#include "xalloc/op_library.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <sys/stat.h>

#include "xalloc/error.h"

namespace xalloc {

void loadOpLibrary(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(path, "cannot load op library: no such file");
  if (!S_ISREG(st.st_mode))
    throw InputError(path, "cannot load op library: not a regular file");
  // By its full path: a name without a slash would be looked up on the loader's search path.
  char* full = ::realpath(path.c_str(), nullptr);
  const std::string resolved = full ? full : path;
  std::free(full);
  if (::dlopen(resolved.c_str(), RTLD_NOW | RTLD_GLOBAL))
    return;
  const char* first = ::dlerror(); // once: a second call returns null
  std::string why = first ? first : "dlopen failed";
  // A library built for Python's torch (torchvision's _C_stable.so) names libtorch's other parts
  // and libtorch_python without an RPATH: in Python, torch has loaded them. Here they are loaded
  // from the torch the tools link (with the libpython libtorch_python needs), and it is tried
  // again; the loader then finds each by the name it was loaded under.
  if (why.find("cannot open shared object file") != std::string::npos) {
    const std::filesystem::path lib(XALLOC_TORCH_LIB_DIR);
    bool loaded = ::dlopen(XALLOC_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL) != nullptr;
    for (const char* name :
         {"libtorch.so", "libc10_cuda.so", "libtorch_cuda.so", "libshm.so", "libtorch_python.so"})
      loaded = loaded && std::filesystem::exists(lib / name) &&
               ::dlopen((lib / name).c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr;
    if (loaded && ::dlopen(resolved.c_str(), RTLD_NOW | RTLD_GLOBAL))
      return;
    if (const char* again = ::dlerror())
      why = again;
  }
  throw InputError(path, "cannot load op library: " + why);
}

namespace {

// The first torchvision/_C*.so in `dir` (a package folder), in name order.
std::string torchvisionIn(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir / "torchvision", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("_C", 0) == 0 && name.size() > 3 &&
        name.compare(name.size() - 3, 3, ".so") == 0 && e.is_regular_file(ec))
      found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? "" : found.front();
}

} // namespace

std::string findTorchvisionLibrary() {
  if (const char* env = std::getenv("XALLOC_TORCHVISION_LIBRARY"); env && *env)
    return env;
  // The environment of the torch the tools are built against first (its torchvision is built
  // for that torch), then the system's.
  std::vector<std::filesystem::path> dirs{std::filesystem::path(XALLOC_TORCH_LIB_DIR) / ".." / "..",
                                          "/usr/lib/python3/dist-packages"};
  std::error_code ec;
  std::vector<std::filesystem::path> local;
  for (const auto& e : std::filesystem::directory_iterator("/usr/local/lib", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("python3", 0) == 0)
      for (const char* sub : {"dist-packages", "site-packages"})
        local.push_back(e.path() / sub);
  }
  std::sort(local.begin(), local.end());
  dirs.insert(dirs.end(), local.begin(), local.end());
  for (const auto& d : dirs)
    if (std::string f = torchvisionIn(d); !f.empty())
      return f;
  return "";
}

} // namespace xalloc
