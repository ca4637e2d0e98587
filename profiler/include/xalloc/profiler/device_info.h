// Facts about the compute device a profile was taken on, including the measured bandwidth of a
// plain contiguous copy: the physical floor every conversion is compared with.
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/common.h"

namespace xalloc::profiler {

/// Logical CPUs this process may run on (affinity mask).
int availableCpus();

/// /proc/cpuinfo's model name ("cpu" when it has none).
std::string cpuName();

/// L1 data, L2 and L3 sizes from sysfs (0 where unknown).
formats::CacheInfo cpuCaches();

/// The BLAS, LAPACK and oneDNN libraries libtorch runs on, as the files they resolve to (a
/// Debian alternative, LD_LIBRARY_PATH) with their sizes: "path@bytes;...". A consumer's timing,
/// and whether a contiguous input changes its output bits, depend on them; a copy's do not.
std::string mathLibraries();

/// The entries of a mathLibraries() string ("path@bytes" each).
std::vector<std::string> splitLibraries(const std::string& libraries);

/// An entry's path, without its size.
std::string libraryPath(const std::string& entry);

/// The BLAS named in mathLibraries() when it is Debian's reference implementation (the
/// `libblas3` alternative in a `blas/` directory), else "".
std::string referenceBlas(const std::string& libraries);

/// Bytes per second (in GB/s, 1e9) that a plain contiguous copy of a buffer larger than the last
/// level cache achieves: median of several copies.
double measureCopyBandwidthGbps();

/// CPU name, core and thread counts, cache sizes, and (unless asked not to) the copy bandwidth.
/// (The functions above need no libtorch: src/cpu_facts.cpp; these two do.)
formats::DeviceInfo describeCpu(bool measure_bandwidth = true);

} // namespace xalloc::profiler
