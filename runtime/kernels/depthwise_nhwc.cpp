// Depthwise 2-D convolutions of channels-last floats (one filter per channel, a MobileNet's or
// EfficientNet's 3x3 and 5x5), run by the packed convolutions (packed_conv.cpp) in place of
// libtorch's oneDNN op: that op makes its oneDNN primitive descriptor again at every call,
// 60-70 us on this VM, where the kernel of a depthwise convolution of MobileNetV3-Small runs
// 10-40 us. An output pixel's channels are summed over its window in registers, eight at a time
// with AVX2 (four vectors of them per pass), the window's taps in order: ATen's values within
// a rounding per tap (the sums run in another order), NaN and infinity carried as the
// arithmetic carries them.
#include "depthwise_nhwc.h"

#include "conv_rows.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/Parallel.h>

namespace xalloc::runtime {

namespace {

using conv_rows::Taps;
using conv_rows::taps;

// One output pixel's channels [c0, c) in plain loops: the baseline, and every variant's tail.
inline void pixelChannels(const Depthwise2d& p, const float* __restrict in_b, float* __restrict dst,
                          std::int64_t oy, std::int64_t ox, Taps ty, Taps tx, std::int64_t c0) {
  for (std::int64_t k = c0; k < p.c; ++k)
    dst[k] = p.bias ? p.bias[k] : 0.0f;
  for (std::int64_t i = ty.first; i < ty.last; ++i) {
    const std::int64_t iy = oy * p.sh - p.ph + i * p.dh;
    for (std::int64_t j = tx.first; j < tx.last; ++j) {
      const std::int64_t ix = ox * p.sw - p.pw + j * p.dw;
      const float* __restrict src = in_b + (iy * p.w + ix) * p.c;
      const float* __restrict wt = p.weight + (i * p.kw + j) * p.c;
      for (std::int64_t k = c0; k < p.c; ++k)
        dst[k] += src[k] * wt[k];
    }
  }
}

} // namespace

// Each variant walks output rows so: row -> (image, y), its kernel rows inside the input, then
// each output pixel of the row and its kernel columns inside the input.
void depthwiseRowsBase(const Depthwise2d& p, std::int64_t begin, std::int64_t end) {
  for (std::int64_t row = begin; row < end; ++row) {
    const std::int64_t oy = row % p.oh;
    const Taps ty = taps(oy * p.sh - p.ph, p.kh, p.dh, p.h);
    const float* in_b = p.in + (row / p.oh) * p.h * p.w * p.c;
    for (std::int64_t ox = 0; ox < p.ow; ++ox)
      pixelChannels(p, in_b, p.out + (row * p.ow + ox) * p.c, oy, ox, ty,
                    taps(ox * p.sw - p.pw, p.kw, p.dw, p.w), 0);
  }
}

#if defined(__x86_64__)
namespace {
// Blocks of 8 channels of one output pixel, `V` vectors at a time, summed over the window in
// registers.
template <int V>
__attribute__((target("avx2,fma"), always_inline)) inline std::int64_t
pixelBlocks(const Depthwise2d& p, const float* __restrict in_b, float* __restrict dst,
            std::int64_t oy, std::int64_t ox, Taps ty, Taps tx, std::int64_t c0) {
  for (; c0 + 8 * V <= p.c; c0 += 8 * V) {
    __m256 acc[V];
    for (int v = 0; v < V; ++v)
      acc[v] = p.bias ? _mm256_loadu_ps(p.bias + c0 + 8 * v) : _mm256_setzero_ps();
    for (std::int64_t i = ty.first; i < ty.last; ++i) {
      const std::int64_t iy = oy * p.sh - p.ph + i * p.dh;
      for (std::int64_t j = tx.first; j < tx.last; ++j) {
        const std::int64_t ix = ox * p.sw - p.pw + j * p.dw;
        const float* src = in_b + (iy * p.w + ix) * p.c + c0;
        const float* wt = p.weight + (i * p.kw + j) * p.c + c0;
        for (int v = 0; v < V; ++v)
          acc[v] =
              _mm256_fmadd_ps(_mm256_loadu_ps(src + 8 * v), _mm256_loadu_ps(wt + 8 * v), acc[v]);
      }
    }
    for (int v = 0; v < V; ++v)
      _mm256_storeu_ps(dst + c0 + 8 * v, acc[v]);
  }
  return c0;
}

// Output pixels [ox, ox + Q) of a row, inside the input on every tap, channels [c0, c0 + 8):
// Q sums in registers, each tap's weights read once for all of them.
template <int Q>
__attribute__((target("avx2,fma"), always_inline)) inline void
interiorPixels(const Depthwise2d& p, const float* __restrict in_b, float* __restrict out_row,
               std::int64_t oy, Taps ty, std::int64_t ox, std::int64_t c0) {
  __m256 acc[Q];
  const __m256 b = p.bias ? _mm256_loadu_ps(p.bias + c0) : _mm256_setzero_ps();
  for (int q = 0; q < Q; ++q)
    acc[q] = b;
  const std::int64_t step = p.sw * p.c; // from one output pixel's window to the next one's
  for (std::int64_t i = ty.first; i < ty.last; ++i) {
    const std::int64_t iy = oy * p.sh - p.ph + i * p.dh;
    const float* src_row = in_b + (iy * p.w + ox * p.sw - p.pw) * p.c + c0;
    const float* wt_row = p.weight + i * p.kw * p.c + c0;
    for (std::int64_t j = 0; j < p.kw; ++j) {
      const __m256 wv = _mm256_loadu_ps(wt_row + j * p.c);
      const float* src = src_row + j * p.dw * p.c;
      for (int q = 0; q < Q; ++q)
        acc[q] = _mm256_fmadd_ps(_mm256_loadu_ps(src + q * step), wv, acc[q]);
    }
  }
  for (int q = 0; q < Q; ++q)
    _mm256_storeu_ps(out_row + (ox + q) * p.c + c0, acc[q]);
}
} // namespace

__attribute__((target("avx2,fma"))) void depthwiseRowsAvx2(const Depthwise2d& p, std::int64_t begin,
                                                           std::int64_t end) {
  // The output columns whose window lies inside the input: [lo, hi).
  const auto [lo, hi] = conv_rows::interiorColumns(p.ow, p.w, p.kw, p.sw, p.pw, p.dw);
  const std::int64_t blocks = p.c / 8 * 8; // channels in whole vectors
  for (std::int64_t row = begin; row < end; ++row) {
    const std::int64_t oy = row % p.oh;
    const Taps ty = taps(oy * p.sh - p.ph, p.kh, p.dh, p.h);
    const float* in_b = p.in + (row / p.oh) * p.h * p.w * p.c;
    float* out_row = p.out + row * p.ow * p.c;
    // The edges, whose windows the padding cuts, one pixel at a time.
    for (std::int64_t ox = 0; ox < p.ow; ++ox) {
      if (ox == lo)
        ox = hi; // past the interior (hi >= lo)
      if (ox >= p.ow)
        break;
      const Taps tx = taps(ox * p.sw - p.pw, p.kw, p.dw, p.w);
      float* dst = out_row + ox * p.c;
      std::int64_t c0 = pixelBlocks<4>(p, in_b, dst, oy, ox, ty, tx, 0);
      c0 = pixelBlocks<1>(p, in_b, dst, oy, ox, ty, tx, c0);
      pixelChannels(p, in_b, dst, oy, ox, ty, tx, c0);
    }
    // The interior: four pixels at a time per vector of channels, then the rest.
    for (std::int64_t c0 = 0; c0 < blocks; c0 += 8) {
      std::int64_t ox = lo;
      for (; ox + 4 <= hi; ox += 4)
        interiorPixels<4>(p, in_b, out_row, oy, ty, ox, c0);
      for (; ox < hi; ++ox)
        interiorPixels<1>(p, in_b, out_row, oy, ty, ox, c0);
    }
    if (blocks < p.c)
      for (std::int64_t ox = lo; ox < hi; ++ox)
        pixelChannels(p, in_b, out_row + ox * p.c, oy, ox, ty, {0, p.kw}, blocks);
  }
}
#endif

void depthwiseNhwc(const Depthwise2d& p, std::int64_t batch, int threads) {
  const auto kernel = cpuKernels().depthwiseRows; // never null: every CPU has the baseline
  conv_rows::runRows(batch * p.oh, threads, p.ow * p.c, p.out, p.act,
                     [&](std::int64_t begin, std::int64_t end) { kernel(p, begin, end); });
}

} // namespace xalloc::runtime
