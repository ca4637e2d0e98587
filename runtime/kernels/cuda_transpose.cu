// The CUDA conversion kernel: batched 2-D transposes through shared-memory tiles.
//
// ATen's copy of a transposed tensor runs its elementwise kernel, whose reads along the
// output's order are strided: each warp touches 32 different source rows, 32 sectors for 32
// elements. Here a block stages a 32x32 tile: it reads 32 source rows along their contiguous
// direction (coalesced), and writes 32 output rows along theirs (coalesced), the transpose
// happening in shared memory. The tile has one padding column so that the column-wise reads
// of shared memory fall into 32 different banks. Each block of 32x8 threads moves a tile, each
// thread four elements; tiles are walked with a grid-stride loop (any batch and size).
// Elements are moved as unsigned integers of their size: every bit pattern survives.
#include "cuda_transpose.h"

#include <algorithm>
#include <cstdint>

namespace xalloc::runtime {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;

// Offset of linear batch index b in the source (Transpose::batchOffset, on the device).
__device__ inline std::int64_t batchOffset(const Transpose& tr, std::int64_t b) {
  std::int64_t off = 0;
  for (int d = tr.batch_dims - 1; d >= 0; --d) {
    off += b % tr.batch_sizes[d] * tr.batch_strides[d];
    b /= tr.batch_sizes[d];
  }
  return off;
}

template <typename T>
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    transposeTiles(const T* __restrict__ in, T* __restrict__ out, const Transpose tr,
                   std::int64_t tiles_r, std::int64_t tiles_c, std::int64_t tiles) {
  __shared__ T tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t b = t / (tiles_r * tiles_c);
    const std::int64_t rc = t % (tiles_r * tiles_c);
    const std::int64_t i0 = (rc % tiles_r) * kTile; // output row = source's contiguous index
    const std::int64_t j0 = (rc / tiles_r) * kTile; // output column = source row
    const T* src = in + batchOffset(tr, b);
    T* dst = out + b * tr.rows * tr.cols;
    // Read: source row j0+y, elements i0+tx (contiguous in the source).
    for (int y = ty; y < kTile; y += kRowsPerPass) {
      const std::int64_t i = i0 + tx, j = j0 + y;
      if (i < tr.rows && j < tr.cols)
        tile[y][tx] = src[j * tr.ld + i];
    }
    __syncthreads();
    // Write: output row i0+y, elements j0+tx (contiguous in the output).
    for (int y = ty; y < kTile; y += kRowsPerPass) {
      const std::int64_t i = i0 + y, j = j0 + tx;
      if (i < tr.rows && j < tr.cols)
        dst[i * tr.cols + j] = tile[tx][y];
    }
    __syncthreads(); // the tile is reused by the next iteration
  }
}

template <typename T>
cudaError_t launch(const void* in, void* out, const Transpose& tr, cudaStream_t stream) {
  const std::int64_t tiles_r = (tr.rows + kTile - 1) / kTile;
  const std::int64_t tiles_c = (tr.cols + kTile - 1) / kTile;
  const std::int64_t tiles = tr.batch() * tiles_r * tiles_c;
  if (tiles == 0)
    return cudaSuccess;
  // Enough blocks to fill every multiprocessor many times over; more only queue.
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, 65535 * 8));
  transposeTiles<T><<<blocks, dim3(kTile, kRowsPerPass), 0, stream>>>(
      static_cast<const T*>(in), static_cast<T*>(out), tr, tiles_r, tiles_c, tiles);
  return cudaGetLastError();
}

} // namespace

cudaError_t launchTranspose(const void* in, void* out, std::size_t item, const Transpose& tr,
                            cudaStream_t stream) {
  switch (item) {
  case 1:
    return launch<std::uint8_t>(in, out, tr, stream);
  case 2:
    return launch<std::uint16_t>(in, out, tr, stream);
  case 4:
    return launch<std::uint32_t>(in, out, tr, stream);
  case 8:
    return launch<std::uint64_t>(in, out, tr, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace xalloc::runtime
