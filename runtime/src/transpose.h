// The runtime's conversion kernel for (batched) 2-D transposes; see transpose.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace xalloc::runtime {

/// After merging dimensions, the source is [batch, rows, cols] with strides
/// [batch_stride, 1, rows]: out[b][i][j] = in[b * batch_stride + i + j * rows].
struct Transpose {
  std::int64_t batch = 1, rows = 0, cols = 0, batch_stride = 0;
};

/// The layout as a batched 2-D transpose, when it is one: dimensions of size 1 dropped,
/// neighbours that are contiguous with each other in the source merged (in output order), and
/// what is left [batch,] rows, cols with strides [batch_stride,] 1, rows. Shape only: each
/// backend adds its own element-size and size policy. Torch-free (the CUDA kernel uses it).
std::optional<Transpose> asBatchedTranspose(const std::int64_t* sizes, const std::int64_t* strides,
                                            std::int64_t ndim);

/// Writes the contiguous [batch, rows, cols] output of 2-, 4- or 8-byte (`item`) elements, on
/// libtorch's intra-op threads when `parallel`.
void transpose(const void* in, void* out, std::size_t item, const Transpose& tr, bool parallel);

} // namespace xalloc::runtime
