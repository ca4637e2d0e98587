// availableCpus from the affinity mask; the BLAS's thread count through the symbols OpenBLAS
// exports (looked up at run time: the reference BLAS has none, and nothing links OpenBLAS).
#include "xalloc/threads.h"

#include <algorithm>

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

namespace xalloc {

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
template <typename Fn> Fn blasSymbol(const char* name) {
  // libblas.so.3 is loaded by libtorch (or by mathLibraries()); RTLD_NOLOAD keeps it that way.
  void* h = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  void* sym = h != nullptr ? ::dlsym(h, name) : nullptr;
  if (sym == nullptr)
    sym = ::dlsym(RTLD_DEFAULT, name);
  return reinterpret_cast<Fn>(sym);
}
} // namespace

int blasThreads() {
  auto get = blasSymbol<int (*)()>("openblas_get_num_threads");
  return get != nullptr ? get() : 0;
}

bool setBlasThreads(int threads) {
  auto set = blasSymbol<void (*)(int)>("openblas_set_num_threads");
  if (set == nullptr || threads < 1)
    return false;
  set(threads);
  return true;
}

} // namespace xalloc
