// What the runtime's direct NHWC convolution kernels share (depthwise_nhwc.cpp,
// grouped_nhwc.cpp): which taps of a window fall inside the input, which output columns have
// whole windows, and the rows of an output split among threads with the epilogue's activation
// over each block of rows just written.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include <ATen/Parallel.h>

#include "epilogue.h"

namespace xalloc::runtime::conv_rows {

/// The taps of output row y (column x) that fall inside the input: [first, last) of kernel rows
/// (columns), for an origin y * stride - pad and dilation d over an input of n.
struct Taps {
  std::int64_t first, last;
};
inline Taps taps(std::int64_t origin, std::int64_t k, std::int64_t d, std::int64_t n) {
  std::int64_t first = 0, last = k;
  while (first < k && origin + first * d < 0)
    ++first;
  while (last > first && origin + (last - 1) * d >= n)
    --last;
  return {first, last};
}

/// The output columns [lo, hi) of `ow` whose window (kernel kw, stride sw, padding pw, dilation
/// dw) lies inside an input row of w.
inline std::pair<std::int64_t, std::int64_t> interiorColumns(std::int64_t ow, std::int64_t w,
                                                             std::int64_t kw, std::int64_t sw,
                                                             std::int64_t pw, std::int64_t dw) {
  std::int64_t lo = 0, hi = ow;
  while (lo < ow && lo * sw - pw < 0)
    ++lo;
  while (hi > lo && (hi - 1) * sw - pw + (kw - 1) * dw >= w)
    --hi;
  return {lo, hi};
}

/// kernel(begin, end) over output rows [0, rows) of row_floats floats each at out, the rows
/// shared among at most `threads` of the caller's intra-op threads; `act` applied to each
/// ~64 KiB of rows as soon as kernel wrote them, while they are in cache.
template <class Kernel>
void runRows(std::int64_t rows, int threads, std::int64_t row_floats, float* out, Activation act,
             const Kernel& kernel) {
  const std::int64_t tasks = std::max(1, threads);
  const std::int64_t chunk =
      std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(row_floats, 1));
  at::parallel_for(0, rows, (rows + tasks - 1) / tasks, [&](std::int64_t begin, std::int64_t end) {
    if (act == Activation::None)
      return kernel(begin, end);
    for (std::int64_t r = begin; r < end; r += chunk) {
      const std::int64_t e = std::min(end, r + chunk);
      kernel(r, e);
      biasActivate(out + r * row_floats, 1, (e - r) * row_floats, 0, nullptr, act);
    }
  });
}

} // namespace xalloc::runtime::conv_rows
