// loadOpLibrary: dlopen a library of custom ops with its symbols global.
#include "xalloc/op_library.h"

#include <cstdlib>
#include <string>

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
  if (!::dlopen(resolved.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = ::dlerror();
    throw InputError(path, std::string("cannot load op library: ") + (why ? why : "dlopen failed"));
  }
}

} // namespace xalloc
