// Facts about the compute device a profile was taken on, including the measured bandwidth of a
// plain contiguous copy: the physical floor every conversion is compared with.
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/types.h"
#include "xalloc/threads.h"

namespace xalloc::profiler {

/// /proc/cpuinfo's model name ("cpu" when it has none).
std::string cpuName();

/// L1 data, L2 and L3 sizes from sysfs (0 where unknown).
formats::CacheInfo cpuCaches();

/// Bytes per second (in GB/s, 1e9) that a plain contiguous copy of a buffer larger than the last
/// level cache achieves: median of several copies.
double measureCopyBandwidthGbps();

/// CPU name, core and thread counts, cache sizes, and (unless asked not to) the copy bandwidth.
/// (The functions above need no libtorch: src/cpu_facts.cpp; these two do.)
formats::DeviceInfo describeCpu(bool measure_bandwidth = true);

} // namespace xalloc::profiler
