// One thread count for all the math: libtorch's intra-op pool and the BLAS's own threads are set
// together, never above the CPUs this process may use. A measurement, a schedule and a timing
// are valid for the count they were taken at.
#pragma once

namespace xalloc::tspass {

/// Sets libtorch's intra-op threads and the BLAS's threads (OpenBLAS) to `requested`, clamped
/// to [1, availableCpus()]; `requested` <= 0 keeps libtorch's count (clamped) and aligns the BLAS
/// to it. Returns the count now in force.
int setMathThreads(int requested);

} // namespace xalloc::tspass
