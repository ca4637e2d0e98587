// xalloc::max_pool2d: 2-D max pooling of a channels-last float tensor without the indices.
// ATen 1.13's max_pool2d is max_pool2d_with_indices with the indices thrown away: on a
// channels-last tensor it writes an int64 index beside every float it outputs and blends them in
// every step, which made SqueezeNet's three poolings 12% of the rewritten model's time. Here an
// output pixel is the running maximum of its window's channel vectors, read where they lie.
//
// The result is ATen's, bit for bit: the same output size (ceil_mode's rule that the last window
// starts inside the input or its left padding), the same windows (padding is never read), and
// NaN kept as ATen keeps it (a NaN in the window is the result). Anything else, an argument ATen
// would refuse included, is ATen's own max_pool2d, so its errors are ATen's: other dtypes and
// layouts, and inputs that want gradients (ATen records them).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "dispatch.h"
#include "packed_checks.h"

namespace xalloc::runtime {

namespace {

// ATen's pooling_output_shape_pad_lr.
std::int64_t outputSize(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride,
                        std::int64_t dilation, bool ceil_mode) {
  const std::int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad)
    --out;
  return out;
}

// The input positions [first, end) in steps of `d` that a window starting at `start` (stride *
// output - padding) reads along one axis of `size`: the padding is never read.
struct Span {
  std::int64_t first, end;
};
inline Span windowSpan(std::int64_t start, std::int64_t k, std::int64_t d, std::int64_t size) {
  const std::int64_t end = std::min(start + (k - 1) * d + 1, size);
  while (start < 0)
    start += d;
  return {start, end};
}

// Output rows [begin, end) (a row: one image's output pixels at one height). Each output pixel
// starts as its window's first channel vector and takes the maximum with the others, a NaN
// taken (ATen: val > max || isnan(val)). One body, compiled into the AVX2 and baseline variants
// below, where the channel loops vectorize (with AVX-512F the table takes poolRowsAvx512).
__attribute__((always_inline)) inline void poolRowsOf(const Pool2d& p, const float* __restrict in,
                                                      float* __restrict out, std::int64_t h,
                                                      std::int64_t w, std::int64_t c,
                                                      std::int64_t begin, std::int64_t end) {
  for (std::int64_t row = begin; row < end; ++row) {
    const std::int64_t b = row / p.oh, y = row % p.oh;
    const auto [ih0, ih1] = windowSpan(y * p.sh - p.ph, p.kh, p.dh, h);
    for (std::int64_t xo = 0; xo < p.ow; ++xo) {
      const auto [iw0, iw1] = windowSpan(xo * p.sw - p.pw, p.kw, p.dw, w);
      float* __restrict dst = out + (row * p.ow + xo) * c;
      bool first = true;
      for (std::int64_t ih = ih0; ih < ih1; ih += p.dh)
        for (std::int64_t iw = iw0; iw < iw1; iw += p.dw) {
          const float* __restrict src = in + ((b * h + ih) * w + iw) * c;
          if (first) {
            for (std::int64_t k = 0; k < c; ++k)
              dst[k] = src[k];
            first = false;
            continue;
          }
          for (std::int64_t k = 0; k < c; ++k) {
            const float v = src[k];
            const float m = dst[k];
            dst[k] = (v > m || v != v) ? v : m;
          }
        }
      if (first) // an empty window (ATen's checks leave none): its -inf
        for (std::int64_t k = 0; k < c; ++k)
          dst[k] = -std::numeric_limits<float>::infinity();
    }
  }
}

} // namespace

#if defined(__x86_64__)
__attribute__((target("avx2"))) void poolRowsAvx2(const Pool2d& p, const float* __restrict in,
                                                  float* __restrict out, std::int64_t h,
                                                  std::int64_t w, std::int64_t c,
                                                  std::int64_t begin, std::int64_t end) {
  poolRowsOf(p, in, out, h, w, c, begin, end);
}
#endif
void poolRowsBase(const Pool2d& p, const float* __restrict in, float* __restrict out,
                  std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t begin,
                  std::int64_t end) {
  poolRowsOf(p, in, out, h, w, c, begin, end);
}

#if defined(__x86_64__)
namespace {

// Up to 8 blocks of 16 channels of one output pixel, their running maxima in registers while the
// window's pixels are read in order, each pixel's channels at once (as they lie in memory).
template <int Blocks>
__attribute__((target("avx512f"), always_inline)) inline void
poolBlocks(const Pool2d& p, const float* __restrict in, float* __restrict dst, std::int64_t b,
           std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t k, std::int64_t lanes,
           std::int64_t ih0, std::int64_t ih1, std::int64_t iw0, std::int64_t iw1) {
  __m512 m[Blocks];
  __mmask16 live[Blocks];
  __mmask16 nan = 0;
  for (int j = 0; j < Blocks; ++j) {
    const std::int64_t left = std::clamp<std::int64_t>(lanes - 16 * j, 0, 16);
    live[j] = static_cast<__mmask16>((1u << left) - 1u);
    m[j] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  }
  for (std::int64_t ih = ih0; ih < ih1; ih += p.dh)
    for (std::int64_t iw = iw0; iw < iw1; iw += p.dw) {
      const float* src = in + ((b * h + ih) * w + iw) * c + k;
      for (int j = 0; j < Blocks; ++j) {
        const __m512 v = live[j] == 0xFFFF ? _mm512_loadu_ps(src + 16 * j)
                                           : _mm512_maskz_loadu_ps(live[j], src + 16 * j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        m[j] = _mm512_mask_max_ps(m[j], 0xFFFF, v, m[j]); // _mm512_max_ps trips GCC 12's warning
      }
    }
  // Plain stores where a block is whole: a masked store that faults a fresh page in costs a
  // microcode assist on AMD (3x the pooling's time where the output was new memory).
  for (int j = 0; j < Blocks; ++j)
    if (live[j] == 0xFFFF)
      _mm512_storeu_ps(dst + k + 16 * j, m[j]);
    else
      _mm512_mask_storeu_ps(dst + k + 16 * j, live[j], m[j]);
  if (nan == 0)
    return;
  for (std::int64_t j = k; j < k + lanes; ++j) { // a NaN in the window: ATen's order, its NaN
    float best = -std::numeric_limits<float>::infinity();
    for (std::int64_t ih = ih0; ih < ih1; ih += p.dh)
      for (std::int64_t iw = iw0; iw < iw1; iw += p.dw) {
        const float v = in[((b * h + ih) * w + iw) * c + j];
        if (v > best || v != v)
          best = v;
      }
    dst[j] = best;
  }
}

// The same rows with AVX-512: each output pixel's running maxima stay in registers, up to 128
// channels at a time (the loop above reads and writes them back per window position, and ran at
// 0.13 ms against 0.10 for SqueezeNet's first pooling at batch 1). The maximum is taken as ATen
// takes it, v > m ? v : m (MAXPS(v, m): an equal value or a signed zero keeps the earlier one);
// channels whose window holds a NaN are done again one by one in ATen's order, so the NaN is
// ATen's.
} // namespace

__attribute__((target("avx512f"))) void poolRowsAvx512(const Pool2d& p, const float* __restrict in,
                                                       float* __restrict out, std::int64_t h,
                                                       std::int64_t w, std::int64_t c,
                                                       std::int64_t begin, std::int64_t end) {
  for (std::int64_t row = begin; row < end; ++row) {
    const std::int64_t b = row / p.oh, y = row % p.oh;
    const auto [ih0, ih1] = windowSpan(y * p.sh - p.ph, p.kh, p.dh, h);
    for (std::int64_t xo = 0; xo < p.ow; ++xo) {
      const auto [iw0, iw1] = windowSpan(xo * p.sw - p.pw, p.kw, p.dw, w);
      float* __restrict dst = out + (row * p.ow + xo) * c;
      for (std::int64_t k = 0; k < c; k += 128) {
        const std::int64_t lanes = std::min<std::int64_t>(128, c - k);
        switch ((lanes + 15) / 16) {
        case 1:
          poolBlocks<1>(p, in, dst, b, h, w, c, k, lanes, ih0, ih1, iw0, iw1);
          break;
        case 2:
          poolBlocks<2>(p, in, dst, b, h, w, c, k, lanes, ih0, ih1, iw0, iw1);
          break;
        case 3:
        case 4:
          poolBlocks<4>(p, in, dst, b, h, w, c, k, lanes, ih0, ih1, iw0, iw1);
          break;
        default:
          poolBlocks<8>(p, in, dst, b, h, w, c, k, lanes, ih0, ih1, iw0, iw1);
          break;
        }
      }
    }
  }
}
#endif

namespace {

// The parameters when the fast path takes them (ATen's own checks passed the same way);
// otherwise nothing, and ATen decides.
std::optional<Pool2d> fastPath(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  if (!x.defined() || x.layout() != at::kStrided || !x.device().is_cpu() ||
      x.scalar_type() != at::kFloat || x.dim() != 4 ||
      !x.is_contiguous(at::MemoryFormat::ChannelsLast) ||
      x.suggest_memory_format() != at::MemoryFormat::ChannelsLast || x.numel() == 0 ||
      detail::wantsGradient(x))
    return std::nullopt;
  // One value or two (height, width); none: the fallbacks (ATen's defaults).
  auto two = [](at::IntArrayRef v, std::int64_t fa, std::int64_t fb, std::int64_t& a,
                std::int64_t& b) {
    if (v.size() > 2)
      return false;
    a = v.empty() ? fa : v[0];
    b = v.empty() ? fb : v.back();
    return true;
  };
  Pool2d p{};
  if (kernel.empty() || !two(kernel, 0, 0, p.kh, p.kw) || !two(stride, p.kh, p.kw, p.sh, p.sw) ||
      !two(padding, 0, 0, p.ph, p.pw) || !two(dilation, 1, 1, p.dh, p.dw))
    return std::nullopt; // the stride left out is the kernel's
  if (p.kh <= 0 || p.kw <= 0 || p.sh <= 0 || p.sw <= 0 || p.dh <= 0 || p.dw <= 0 || p.ph < 0 ||
      p.pw < 0 || p.ph > p.kh / 2 || p.pw > p.kw / 2)
    return std::nullopt;
  p.oh = outputSize(x.size(2), p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.ow = outputSize(x.size(3), p.kw, p.pw, p.sw, p.dw, ceil_mode);
  if (p.oh < 1 || p.ow < 1)
    return std::nullopt;
  return p;
}

at::Tensor maxPool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  const auto p = fastPath(x, kernel, stride, padding, dilation, ceil_mode);
  if (!p)
    return at::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode);
  const std::int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  at::Tensor out =
      at::empty({n, c, p->oh, p->ow}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const std::int64_t rows = n * p->oh;
  // Rows of output pixels; a task of at least 32 KiB of input read.
  const std::int64_t grain =
      std::max<std::int64_t>(1, (32 << 10) / std::max<std::int64_t>(1, p->ow * c * 4 * p->kh));
  const auto poolRows = cpuKernels().poolRows;
  at::parallel_for(0, rows, grain, [&](std::int64_t begin, std::int64_t end) {
    poolRows(*p, in, o, h, w, c, begin, end);
  });
  // Each output is one of the input's values: a bound the input carries holds for it too.
  if (const auto b = detail::knownBound(x))
    detail::noteBound(out, *b);
  return out;
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
        maxPool2d);
}

} // namespace xalloc::runtime
