// Facts about the compute device a profile was taken on, including the measured bandwidth of a
// plain contiguous copy: the physical floor every conversion is compared with.
#pragma once

#include "xalloc/formats/common.h"

namespace xalloc::profiler {

/// Logical CPUs this process may run on (affinity mask).
int availableCpus();

/// Bytes per second (in GB/s, 1e9) that a plain contiguous copy of a buffer larger than the last
/// level cache achieves: median of several copies.
double measureCopyBandwidthGbps();

/// CPU name, core and thread counts, cache sizes, and (unless asked not to) the copy bandwidth.
formats::DeviceInfo describeCpu(bool measure_bandwidth = true);

} // namespace xalloc::profiler
