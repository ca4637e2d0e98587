// A conversion fused into its producer: a pointwise op (layout family Unary or Binary) that has
// an out variant writes its output into a fresh row-major buffer itself, instead of computing in
// its inputs' layout and being copied after. TensorIterator iterates in the output's layout when
// it is given one of the right sizes, so the op reads its inputs strided and writes row-major in
// one pass: the conversion's pass is gone. xprof measures it (ProducerFusion), xrewrite writes it.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace torch::jit {
struct Node;
struct Operator;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

/// The out variant of `producer` ("aten::mul.out" for aten::mul.Tensor): the same arguments plus
/// a trailing `out`, for a pointwise op that does not write its input in place and makes one
/// tensor. Null when it has none.
std::shared_ptr<torch::jit::Operator> outVariantOf(const torch::jit::Node* producer);

/// "aten::mul.out": the qualified name and overload of an operator's schema.
std::string operatorName(const torch::jit::Operator& op);

/// `n` is a pointwise op writing into `aten::empty_like(x, memory_format=contiguous_format)`
/// through its out variant: a producer fused with its conversion by fuseIntoProducer.
bool writesRowMajorItself(const torch::jit::Node* n);

/// Replaces `producer` by its out variant writing into
/// `aten::empty_like(producer.input(template_input), memory_format=contiguous_format)`, placed
/// where it was, with its source range and scope; the old output's uses move to the new one and
/// the old node is destroyed. Returns the new output, or null (nothing changed) when the producer
/// has no out variant or `template_input` is not one of its tensor inputs.
torch::jit::Value* fuseIntoProducer(torch::jit::Node* producer, std::size_t template_input);

} // namespace xalloc::tspass
