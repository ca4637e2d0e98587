// Tensors a graph computes from constants alone: in a frozen model (torch.jit.freeze) the
// weights are prim::Constant tensors, and a weight's transpose is known before the model runs.
// Converting such a value costs nothing at run time: xrewrite stores the constant in the layout
// its consumers read (the transpose of a column-major copy is row-major), once, instead of
// converting per call. xprof marks these values (origin "constant") with the same test, so
// xsched prices their conversion as free.
#pragma once

#include <optional>

namespace at {
class Tensor;
}
namespace torch::jit {
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

/// True when `v` is a prim::Constant tensor, or a chain of aten::t / transpose / permute (with
/// constant dims) over one, the constant and each link read only by the next link.
bool isConstantTensor(const torch::jit::Value* v);

/// The value of such a tensor, computed with the graph's own operators; nullopt when `v` is not
/// constant or evaluating it fails.
std::optional<at::Tensor> evaluateConstant(const torch::jit::Value* v);

/// The constant at the base of `v`'s chain, with the same sizes and values, stored so that the
/// chain yields a contiguous `v`; nullopt when `v` is not constant.
std::optional<at::Tensor> relayoutForContiguous(const torch::jit::Value* v);

} // namespace xalloc::tspass
