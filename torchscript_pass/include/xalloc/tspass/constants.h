// Tensors a graph computes from constants alone: in a frozen model (torch.jit.freeze) the
// weights are prim::Constant tensors, and a weight's transpose or permutation is known before
// the model runs. Converting such a value costs nothing at run time: xrewrite converts it once
// and stores the contiguous copy in the model as a constant. xprof marks these values
// (origin "constant") with the same test, so xsched prices them as free.
#pragma once

#include <optional>

namespace at {
class Tensor;
}
namespace torch::jit {
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

/// True when `v` is a tensor computed only from constants by view ops (t, transpose, permute,
/// expand, slice, select, (un)squeeze, view, reshape, flatten, narrow) or a contiguous call,
/// through at most a few nodes. A prim::Constant tensor itself is constant too.
bool isConstantTensor(const torch::jit::Value* v);

/// The value of such a tensor, computed with the graph's own operators; nullopt when `v` is not
/// constant or evaluating it fails.
std::optional<at::Tensor> evaluateConstant(const torch::jit::Value* v);

} // namespace xalloc::tspass
