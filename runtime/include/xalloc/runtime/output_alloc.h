// Output tensors of the runtime's conversions (see src/output_alloc.cpp): outputs of at least
// kHugePageOutputBytes are mapped with transparent huge pages asked for, and their mappings are
// cached for reuse when freed, unless another CPU allocator than libtorch's is installed, which
// then allocates every output.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace xalloc::runtime {

inline constexpr std::size_t kHugePageOutputBytes = std::size_t{4} << 20;

/// An uninitialized contiguous CPU tensor with the sizes and dtype of `like`.
at::Tensor emptyOutput(const at::Tensor& like);

/// Unmaps the cached mappings of freed outputs (kept for reuse, XALLOC_OUTPUT_CACHE_MB, default
/// 256 MiB); returns the bytes given back.
std::size_t releaseOutputCache();

/// How many outputs were mapped with huge pages asked for since the process started.
std::int64_t hugePageOutputs();

} // namespace xalloc::runtime
