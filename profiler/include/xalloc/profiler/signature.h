// What a measurement depends on, as text: an op's kind and overload with the layouts (not the
// values) of its tensor arguments and the values of the others. Equal signatures on the same
// device and library time the same, so the timing database keys measurements by them.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

namespace torch::jit {
struct Node;
}

namespace xalloc::profiler {

/// "float32[4,64]/[64,1]+0@cpu" (dtype, sizes, strides, storage offset, device).
std::string layoutSignature(const at::Tensor& t);

/// A tensor by layout; lists and tuples element by element; scalars by value; objects by type.
std::string argumentSignature(const c10::IValue& v);

/// "aten::linear.default(float32[4,64]/[64,1]+0@cpu, ...)".
std::string opSignature(const torch::jit::Node* node, const std::vector<c10::IValue>& inputs);

} // namespace xalloc::profiler
