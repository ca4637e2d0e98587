// isConstantTensor / evaluateConstant / relayoutForContiguous.
#include "xalloc/tspass/constants.h"

#include <numeric>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// Weight transposes sit one or two links from their constant; bounds the walk.
constexpr int kMaxLinks = 8;

bool isTensor(const Value* v) {
  return v->type()->cast<c10::TensorType>() != nullptr;
}

bool permutes(const Node* n) {
  return (n->kind() == c10::aten::t || n->kind() == c10::aten::transpose ||
          n->kind() == c10::aten::permute) &&
         n->blocks().empty() && n->outputs().size() == 1 && !n->inputs().empty() &&
         isTensor(n->input(0));
}

// A constant non-tensor argument: a literal, or a list of literals (permute's dims).
bool constantArgument(const Value* v) {
  const Node* n = v->node();
  if (n->kind() == c10::prim::Constant)
    return true;
  if (n->kind() != c10::prim::ListConstruct)
    return false;
  for (const Value* in : n->inputs())
    if (in->node()->kind() != c10::prim::Constant)
      return false;
  return true;
}

// The links from the base constant to `v`, base first; nullopt when `v` is not such a chain.
std::optional<std::vector<const Node*>> chainOf(const Value* v) {
  if (!isTensor(v))
    return std::nullopt;
  std::vector<const Node*> links;
  const Value* cur = v;
  for (int depth = 0; depth <= kMaxLinks; ++depth) {
    const Node* n = cur->node();
    if (n->kind() == c10::prim::Constant) {
      std::reverse(links.begin(), links.end());
      return links;
    }
    if (!permutes(n))
      return std::nullopt;
    for (std::size_t i = 1; i < n->inputs().size(); ++i)
      if (!constantArgument(n->input(i)))
        return std::nullopt;
    links.push_back(n);
    cur = n->input(0);
    // Every link, and the constant itself, read by the next link alone: their layout is then
    // ours to choose. (A constant read elsewhere too cannot be stored twice in two layouts:
    // saving a model keeps one copy of tensors that compare equal.)
    if (cur->uses().size() != 1)
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<c10::IValue> evaluate(const Value* v);

// Runs `n` with its inputs evaluated, the first one replaced by `first` when given; its
// outputs, or nullopt when an input cannot be evaluated or the op fails.
std::optional<torch::jit::Stack> call(const Node* n, std::optional<c10::IValue> first = {}) {
  torch::jit::Stack stack;
  for (std::size_t i = 0; i < n->inputs().size(); ++i) {
    auto iv = i == 0 && first ? first : evaluate(n->input(i));
    if (!iv)
      return std::nullopt;
    stack.push_back(std::move(*iv));
  }
  try {
    n->getOperation()(stack);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (stack.size() != n->outputs().size())
    return std::nullopt;
  return stack;
}

std::optional<c10::IValue> evaluate(const Value* v) {
  const Node* n = v->node();
  if (n->kind() == c10::prim::Constant)
    return torch::jit::toIValue(v);
  auto out = call(n);
  if (!out)
    return std::nullopt;
  return (*out)[v->offset()];
}

} // namespace

bool isConstantTensor(const Value* v) {
  return chainOf(v).has_value();
}

std::optional<at::Tensor> evaluateConstant(const Value* v) {
  if (!isConstantTensor(v))
    return std::nullopt;
  at::NoGradGuard no_grad;
  auto iv = evaluate(v);
  if (!iv || !iv->isTensor())
    return std::nullopt;
  return iv->toTensor();
}

std::optional<at::Tensor> relayoutForContiguous(const Value* v) {
  auto links = chainOf(v);
  if (!links)
    return std::nullopt;
  const Value* base_value = links->empty() ? v : links->front()->input(0);
  auto base_iv = torch::jit::toIValue(base_value);
  if (!base_iv || !base_iv->isTensor())
    return std::nullopt;
  at::NoGradGuard no_grad;
  const at::Tensor base = base_iv->toTensor();
  // The chain is a permutation of the base's dims: v = base.permute(perm). Each link runs on a
  // tensor whose strides carry the dims' numbers (sizes 1, no data), which it permutes.
  const auto rank = base.dim();
  std::vector<int64_t> perm(static_cast<std::size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  for (const Node* n : *links) {
    std::vector<int64_t> strides(static_cast<std::size_t>(rank));
    for (int64_t d = 0; d < rank; ++d)
      strides[static_cast<std::size_t>(d)] = perm[static_cast<std::size_t>(d)] + 1;
    const std::vector<int64_t> sizes(static_cast<std::size_t>(rank), 1);
    auto result = call(n, at::empty_strided(sizes, strides));
    if (!result || !(*result)[0].isTensor())
      return std::nullopt;
    const at::Tensor out = (*result)[0].toTensor();
    for (int64_t d = 0; d < rank; ++d)
      perm[static_cast<std::size_t>(d)] = out.stride(d) - 1;
  }
  // v's contiguous copy, viewed back through the inverse permutation: the base's sizes and
  // values, in the storage order that makes the chain's result row-major.
  auto value = evaluateConstant(v);
  if (!value)
    return std::nullopt;
  const at::Tensor dense = value->contiguous().clone();
  std::vector<int64_t> inverse(static_cast<std::size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    inverse[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])] = d;
  at::Tensor out = dense.permute(inverse);
  if (!out.sizes().equals(base.sizes()) || !out.permute(perm).is_contiguous())
    return std::nullopt;
  return out;
}

} // namespace xalloc::tspass
