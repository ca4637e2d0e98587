// How many threads the math runs on: the CPUs this process may use, and the BLAS's own thread
// count (OpenBLAS keeps one apart from libtorch's intra-op pool). No libtorch here; the pair is
// set together by tspass::setMathThreads.
#pragma once

namespace xalloc {

/// Logical CPUs this process may run on (affinity mask).
int availableCpus();

/// The BLAS's thread count (OpenBLAS's openblas_get_num_threads), or 0 when the BLAS this
/// process runs on has no thread control (the reference BLAS is single-threaded).
int blasThreads();

/// Sets the BLAS's thread count where it has one; false when it has none.
bool setBlasThreads(int threads);

} // namespace xalloc
