// describeCpu: the CPU's facts (cpu_facts.cpp), libtorch's thread count, and a copy bandwidth
// probe.
#include "xalloc/profiler/device_info.h"
#include "xalloc/math_libraries.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "xalloc/profiler/measure.h"

namespace xalloc::profiler {

double measureCopyBandwidthGbps() {
  // 64 MiB (or 2x the last-level cache, if larger) so the copy runs from memory.
  std::int64_t bytes = std::max<std::int64_t>(64ll << 20, 2 * cpuCaches().l3_bytes);
  auto src = at::ones({bytes / 4}, at::kFloat);
  auto dst = at::empty_like(src);
  TimingStats s = timeRepeated([&] { dst.copy_(src); }, 2, 7);
  return s.median_ms > 0 ? static_cast<double>(bytes) / (s.median_ms * 1e-3) / 1e9 : 0.0;
}

formats::DeviceInfo describeCpu(bool measure_bandwidth) {
  formats::DeviceInfo d;
  d.type = "cpu";
  d.name = cpuName();
  d.threads = at::get_num_threads();
  // The math libraries first: finding them loads a BLAS the wheel's libtorch does not (it
  // runs on MKL inside libtorch_cpu), and its thread count is then the same at every profile
  // of the process (the first read 0, the next ones OpenBLAS's count: another scope).
  d.libraries = mathLibraries();
  d.blas_threads = blasThreads();
  d.cores = availableCpus();
  d.caches = cpuCaches();
  if (measure_bandwidth)
    d.copy_bandwidth_gbps = std::round(measureCopyBandwidthGbps() * 1000) / 1000;
  return d;
}

} // namespace xalloc::profiler
