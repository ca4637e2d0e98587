// Grouped 2-D convolutions of channels-last floats (grouped_nhwc.h). libtorch's oneDNN op runs
// RegNetY-400MF's 3x3 convolutions of groups of eight channels at 0.2-0.5 ms each on this VM, at
// a few GFLOP/s, its descriptor made again at every call. Here each output pixel's block of
// eight output channels of a group is one AVX2 vector: per tap and input channel of the group,
// one weight vector times the input broadcast, for eight pixels at a time. The sums run tap by
// tap, input channel by channel (another order than oneDNN's: ATen's values within a rounding
// per term), NaN and infinity carried as the arithmetic carries them.
#include "grouped_nhwc.h"

#include <algorithm>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "conv_rows.h"

namespace xalloc::runtime {

namespace {

using conv_rows::Taps;
using conv_rows::taps;

// P pixels ox, ox + 1, ... of output row oy, one block of eight output channels of group g, in
// plain loops (the baseline; tx the taps every one of the P pixels has).
template <int P>
inline void pixelsBase(const Grouped2d& p, const float* __restrict in_b, float* __restrict out_row,
                       std::int64_t oy, std::int64_t ox, Taps ty, Taps tx, std::int64_t g,
                       std::int64_t b) {
  const std::int64_t cin = p.groups * p.ci, cout = p.groups * p.co, taps_n = p.kh * p.kw;
  const std::int64_t oc = g * p.co + b * 8;
  float acc[P][8];
  for (int q = 0; q < P; ++q)
    for (int l = 0; l < 8; ++l)
      acc[q][l] = p.bias ? p.bias[oc + l] : 0.f;
  const float* wg = p.weight + ((g * (p.co / 8) + b) * taps_n) * p.ci * 8;
  for (std::int64_t i = ty.first; i < ty.last; ++i) {
    const std::int64_t iy = oy * p.sh - p.ph + i * p.dh;
    for (std::int64_t j = tx.first; j < tx.last; ++j) {
      const float* wt = wg + (i * p.kw + j) * p.ci * 8;
      for (int q = 0; q < P; ++q) {
        const std::int64_t ix = (ox + q) * p.sw - p.pw + j * p.dw;
        const float* src = in_b + (iy * p.w + ix) * cin + g * p.ci;
        for (std::int64_t c = 0; c < p.ci; ++c)
          for (int l = 0; l < 8; ++l)
            acc[q][l] += src[c] * wt[c * 8 + l];
      }
    }
  }
  for (int q = 0; q < P; ++q)
    std::copy(acc[q], acc[q] + 8, out_row + (ox + q) * cout + oc);
}

template <class Pixels>
void rows(const Grouped2d& p, std::int64_t begin, std::int64_t end, Pixels pixels) {
  const auto [lo, hi] = conv_rows::interiorColumns(p.ow, p.w, p.kw, p.sw, p.pw, p.dw);
  const std::int64_t cin = p.groups * p.ci, cout = p.groups * p.co;
  for (std::int64_t row = begin; row < end; ++row) {
    const std::int64_t oy = row % p.oh;
    const Taps ty = taps(oy * p.sh - p.ph, p.kh, p.dh, p.h);
    const float* in_b = p.in + (row / p.oh) * p.h * p.w * cin;
    float* out_row = p.out + row * p.ow * cout;
    // Each block of pixels through every group and block of outputs: its windows' input
    // (a few KiB) and the weights stay in L1 between them.
    auto blocks = [&](auto width, std::int64_t ox, Taps tx) {
      for (std::int64_t g = 0; g < p.groups; ++g)
        for (std::int64_t b = 0; b < p.co / 8; ++b)
          pixels.template operator()<decltype(width)::value>(p, in_b, out_row, oy, ox, ty, tx, g,
                                                             b);
    };
    using One = std::integral_constant<int, 1>;
    for (std::int64_t ox = 0; ox < p.ow; ++ox) {
      if (ox == lo)
        ox = hi; // the edges, whose windows the padding cuts, one pixel at a time
      if (ox >= p.ow)
        break;
      blocks(One{}, ox, taps(ox * p.sw - p.pw, p.kw, p.dw, p.w));
    }
    std::int64_t ox = lo;
    for (; ox + 8 <= hi; ox += 8)
      blocks(std::integral_constant<int, 8>{}, ox, Taps{0, p.kw});
    for (; ox + 4 <= hi; ox += 4)
      blocks(std::integral_constant<int, 4>{}, ox, Taps{0, p.kw});
    for (; ox < hi; ++ox)
      blocks(One{}, ox, Taps{0, p.kw});
  }
}

struct BasePixels {
  template <int P>
  void operator()(const Grouped2d& p, const float* in_b, float* out_row, std::int64_t oy,
                  std::int64_t ox, Taps ty, Taps tx, std::int64_t g, std::int64_t b) const {
    pixelsBase<P>(p, in_b, out_row, oy, ox, ty, tx, g, b);
  }
};

#if defined(__x86_64__)
template <int P>
__attribute__((target("avx2,fma"), always_inline)) inline void
pixelsAvx2(const Grouped2d& p, const float* __restrict in_b, float* __restrict out_row,
           std::int64_t oy, std::int64_t ox, Taps ty, Taps tx, std::int64_t g, std::int64_t b) {
  const std::int64_t cin = p.groups * p.ci, cout = p.groups * p.co, taps_n = p.kh * p.kw;
  const std::int64_t oc = g * p.co + b * 8;
  __m256 acc[P];
#pragma GCC unroll 8
  for (int q = 0; q < P; ++q)
    acc[q] = p.bias ? _mm256_loadu_ps(p.bias + oc) : _mm256_setzero_ps();
  const float* wg = p.weight + ((g * (p.co / 8) + b) * taps_n) * p.ci * 8;
  const std::int64_t step = p.sw * cin; // from one pixel's window to the next one's
  for (std::int64_t i = ty.first; i < ty.last; ++i) {
    const std::int64_t iy = oy * p.sh - p.ph + i * p.dh;
    for (std::int64_t j = tx.first; j < tx.last; ++j) {
      const float* wt = wg + (i * p.kw + j) * p.ci * 8;
      const float* src = in_b + (iy * p.w + ox * p.sw - p.pw + j * p.dw) * cin + g * p.ci;
      for (std::int64_t c = 0; c < p.ci; ++c) {
        const __m256 w = _mm256_loadu_ps(wt + c * 8);
#pragma GCC unroll 8
        for (int q = 0; q < P; ++q)
          acc[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(src + q * step + c), w, acc[q]);
      }
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < P; ++q)
    _mm256_storeu_ps(out_row + (ox + q) * cout + oc, acc[q]);
}

struct Avx2Pixels {
  template <int P>
  __attribute__((target("avx2,fma"))) void
  operator()(const Grouped2d& p, const float* in_b, float* out_row, std::int64_t oy,
             std::int64_t ox, Taps ty, Taps tx, std::int64_t g, std::int64_t b) const {
    pixelsAvx2<P>(p, in_b, out_row, oy, ox, ty, tx, g, b);
  }
};
#endif

} // namespace

void groupedRowsBase(const Grouped2d& p, std::int64_t begin, std::int64_t end) {
  rows(p, begin, end, BasePixels{});
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void groupedRowsAvx2(const Grouped2d& p, std::int64_t begin,
                                                         std::int64_t end) {
  rows(p, begin, end, Avx2Pixels{});
}
#endif

bool groupedNhwcTakes(std::int64_t groups, std::int64_t in_per_group, std::int64_t out_per_group) {
  // One group of at most four inputs is a network's first convolution (RGB to 16, 24 or 32
  // channels: 0.47 ms in libtorch's op for MobileNetV3's 3->16 at 224x224 on this VM).
  if (in_per_group < 1 || out_per_group < 8 || out_per_group % 8 != 0)
    return false;
  return groups > 1 || in_per_group <= 4;
}

at::Tensor groupedNhwcWeight(const at::Tensor& weight, std::int64_t groups) {
  // [groups * co, ci, kh, kw] -> [groups, co / 8, kh, kw, ci, 8]
  const std::int64_t co = weight.size(0) / groups, ci = weight.size(1);
  return weight.contiguous()
      .view({groups, co / 8, 8, ci, weight.size(2), weight.size(3)})
      .permute({0, 1, 4, 5, 3, 2})
      .contiguous();
}

void groupedNhwc(const Grouped2d& p, std::int64_t batch, int threads) {
  const auto kernel = cpuKernels().groupedRows; // never null: every CPU has the baseline
  conv_rows::runRows(batch * p.oh, threads, p.ow * p.groups * p.co, p.out, p.act,
                     [&](std::int64_t begin, std::int64_t end) { kernel(p, begin, end); });
}

} // namespace xalloc::runtime
