// A product's epilogue over rows of channels-last floats (epilogue.cpp): the bias added and the
// activation applied in one pass over each tile while it is still in cache, as MLAS and oneDNN
// do after their GEMM kernels. What the packed ops' GEMM path and the depthwise kernel run
// instead of ATen's bias copy and a second pass over the whole output.
//
// Each activation is ATen's formula on floats: relu max(x, 0), silu x / (1 + exp(-x)),
// hardswish x * min(max(x + 3, 0), 6) / 6, sigmoid 1 / (1 + exp(-x)), relu6 min(max(x, 0), 6),
// hardsigmoid min(max(x + 3, 0), 6) / 6. NaN stays NaN, +-inf and overflow go where ATen's do
// (silu(-inf) is NaN, silu(+inf) +inf, hardswish of x > 5.67e37 overflows). exp is Cephes'
// degree-6 polynomial after a Cody-Waite reduction: within 4e-7 of the exact silu relatively.
#pragma once

#include <cstdint>
#include <optional>

#include "dispatch.h"
#include "xalloc/runtime/packed.h"

namespace xalloc::runtime {

/// The epilogue's form of a post-op, or none where it has none (gelu, tanh: ATen's op runs).
std::optional<Activation> epilogueActivation(PostOp p);

/// rows x n floats at c (row i at c + i * ld): bias[j] added to column j (bias may be null),
/// then `a` applied, in place. The best variant this CPU runs.
void biasActivate(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld, const float* bias,
                  Activation a);

} // namespace xalloc::runtime
