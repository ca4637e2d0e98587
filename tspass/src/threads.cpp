// setMathThreads: libtorch's and the BLAS's thread counts, set together.
#include "xalloc/tspass/threads.h"

#include <algorithm>

#include <ATen/Parallel.h>

#include "xalloc/threads.h"

namespace xalloc::tspass {

int setMathThreads(int requested) {
  const int cpus = availableCpus();
  const int n = std::clamp(requested > 0 ? requested : at::get_num_threads(), 1, cpus);
  if (at::get_num_threads() != n)
    at::set_num_threads(n);
  setBlasThreads(n);
  return n;
}

} // namespace xalloc::tspass
