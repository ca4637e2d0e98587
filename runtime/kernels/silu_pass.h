// SiLU over a float32 buffer in place, as one AVX-512 pass: what the packed convolutions and
// linears run after oneDNN's kernel instead of oneDNN 2.6's swish post-op, which costs ~1.7x as
// much per element on AVX-512 (EfficientNet-B0's 16->96 expansion at 112x112: 172 us for the
// convolution, 267 more with the post-op, 158 more with this pass).
//
// y = x / (1 + exp(-x)), ATen's formula: NaN stays NaN, +inf gives +inf, -inf gives NaN (ATen's
// -inf / inf), and a large negative x gives -0. exp is Cephes' degree-6 polynomial after a
// Cody-Waite reduction (relative error of y under 2e-7, as oneDNN's swish).
#pragma once

#include <cstdint>

namespace xalloc::runtime {

/// True when this CPU runs the pass (AVX-512F); without it callers keep oneDNN's post-op.
bool hasSiluPass();

/// y = silu(y) over n floats (n >= 0; p may be null when n is 0), split between ATen's threads.
/// Only when hasSiluPass().
void siluInPlace(float* p, std::int64_t n);

} // namespace xalloc::runtime
