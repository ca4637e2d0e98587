// The runtime's transpose kernel under AddressSanitizer and UndefinedBehaviorSanitizer: random
// batched transposes of 2-, 4- and 8-byte elements, in exactly sized heap buffers (so a read or
// write past either end is caught), batch strides with and without gaps, outputs small and large
// enough for streaming stores, on one thread and split over libtorch's intra-op threads; each
// element checked against the definition out[b][i][j] = in[b * batch_stride + i + j * rows].
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../../runtime/kernels/transpose.h"

using xalloc::runtime::Transpose;

namespace {

template <typename T> std::int64_t mismatches(std::mt19937& rng, bool parallel) {
  Transpose tr;
  const bool large = rng() % 4 == 0; // 4 MiB and more: streaming stores
  tr.rows = 1 + static_cast<std::int64_t>(rng() % (large ? 2100 : 300));
  tr.cols = 1 + static_cast<std::int64_t>(rng() % (large ? 700 : 300));
  tr.ld = tr.rows + (rng() % 2 ? static_cast<std::int64_t>(rng() % 40) : 0);
  // Batch dimensions, innermost first in the source: each spans the previous with a gap or not.
  tr.batch_dims = static_cast<int>(rng() % (large ? 2 : 4));
  std::int64_t span = (tr.cols - 1) * tr.ld + tr.rows; // elements one matrix reaches
  for (int d = tr.batch_dims - 1; d >= 0; --d) {
    tr.batch_sizes[d] = 1 + static_cast<std::int64_t>(rng() % 3);
    tr.batch_strides[d] = span + (rng() % 2 ? 7 : 0);
    span = (tr.batch_sizes[d] - 1) * tr.batch_strides[d] + span;
  }
  const auto in_n = static_cast<std::size_t>(span);
  const auto out_n = static_cast<std::size_t>(tr.batch() * tr.rows * tr.cols);
  T* in = static_cast<T*>(std::malloc(in_n * sizeof(T)));
  T* out = static_cast<T*>(std::malloc(out_n * sizeof(T)));
  for (std::size_t i = 0; i < in_n; ++i)
    in[i] = static_cast<T>(rng());
  xalloc::runtime::transpose(in, out, sizeof(T), tr, parallel);
  std::int64_t bad = 0;
  for (std::int64_t b = 0; b < tr.batch(); ++b)
    for (std::int64_t i = 0; i < tr.rows; ++i)
      for (std::int64_t j = 0; j < tr.cols; ++j)
        bad += out[(b * tr.rows + i) * tr.cols + j] != in[tr.batchOffset(b) + i + j * tr.ld];
  std::free(in);
  std::free(out);
  return bad;
}

} // namespace

TEST(TransposeKernel, MatchesTheDefinitionWithinItsBuffers) {
  std::mt19937 rng(1);
  for (int k = 0; k < 200; ++k) {
    const bool parallel = k % 2 == 1;
    ASSERT_EQ(mismatches<std::uint16_t>(rng, parallel), 0) << "2-byte case " << k;
    ASSERT_EQ(mismatches<std::uint32_t>(rng, parallel), 0) << "4-byte case " << k;
    ASSERT_EQ(mismatches<std::uint64_t>(rng, parallel), 0) << "8-byte case " << k;
  }
}
