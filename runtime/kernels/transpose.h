// The runtime's conversion kernel for (batched) 2-D transposes; see transpose.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace xalloc::runtime {

/// After merging dimensions, the source is [batch..., rows, cols] with strides
/// [batch_strides..., 1, ld]: out[b][i][j] = in[offset(b) + i + j * ld], where offset(b) walks
/// the batch dimensions of linear batch index b (row-major). ld == rows for a transposed dense
/// matrix; ld > rows for one cut from a wider one (attention's heads: K^T of [B, T, H, D] is
/// [B, H] batches of D x T read with ld = H * D).
struct Transpose {
  static constexpr int kMaxBatchDims = 3;
  std::int64_t rows = 0, cols = 0, ld = 0;
  int batch_dims = 0;
  std::int64_t batch_sizes[kMaxBatchDims] = {}, batch_strides[kMaxBatchDims] = {};

  std::int64_t batch() const {
    std::int64_t n = 1;
    for (int d = 0; d < batch_dims; ++d)
      n *= batch_sizes[d];
    return n;
  }
  std::int64_t batchOffset(std::int64_t b) const {
    std::int64_t off = 0;
    for (int d = batch_dims - 1; d >= 0; --d) {
      off += b % batch_sizes[d] * batch_strides[d];
      b /= batch_sizes[d];
    }
    return off;
  }
};

/// The layout as a batched 2-D transpose, when it is one: dimensions of size 1 dropped,
/// neighbours that are contiguous with each other in the source merged (in output order), and
/// what is left up to three batch dimensions, then rows with stride 1 and cols with stride
/// ld >= rows. Shape only: each backend adds its own element-size and size policy. Torch-free
/// (the CUDA kernel uses it).
std::optional<Transpose> asBatchedTranspose(const std::int64_t* sizes, const std::int64_t* strides,
                                            std::int64_t ndim);

/// Writes the contiguous [batch, rows, cols] output of 2-, 4- or 8-byte (`item`) elements, on
/// libtorch's intra-op threads when `parallel`.
void transpose(const void* in, void* out, std::size_t item, const Transpose& tr, bool parallel);

} // namespace xalloc::runtime
