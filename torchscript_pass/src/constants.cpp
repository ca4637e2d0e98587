// isConstantTensor / evaluateConstant.
#include "xalloc/tspass/constants.h"

#include <set>

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// Deep enough for a weight's transpose behind a reshape or two; bounds the work per value.
constexpr int kMaxDepth = 8;

bool foldableOp(const Node* n) {
  static const std::set<c10::Symbol> ops = {
      c10::aten::t,         c10::aten::transpose, c10::aten::permute,   c10::aten::expand,
      c10::aten::slice,     c10::aten::select,    c10::aten::unsqueeze, c10::aten::squeeze,
      c10::aten::view,      c10::aten::reshape,   c10::aten::flatten,   c10::aten::narrow,
      c10::aten::contiguous};
  return ops.count(n->kind()) > 0 && n->blocks().empty() && n->outputs().size() == 1;
}

// A constant non-tensor argument: a literal, or a list of literals (permute's dims).
bool constantArgument(const Value* v) {
  const Node* n = v->node();
  if (n->kind() == c10::prim::Constant)
    return true;
  if (n->kind() == c10::prim::ListConstruct) {
    for (const Value* in : n->inputs())
      if (in->node()->kind() != c10::prim::Constant)
        return false;
    return true;
  }
  return false;
}

bool isTensor(const Value* v) {
  return v->type()->cast<c10::TensorType>() != nullptr;
}

bool constantTensor(const Value* v, int depth) {
  if (!isTensor(v))
    return false;
  const Node* n = v->node();
  if (n->kind() == c10::prim::Constant)
    return true;
  if (depth >= kMaxDepth || !foldableOp(n))
    return false;
  bool has_tensor = false;
  for (const Value* in : n->inputs()) {
    if (isTensor(in)) {
      if (!constantTensor(in, depth + 1))
        return false;
      has_tensor = true;
    } else if (!constantArgument(in)) {
      return false;
    }
  }
  return has_tensor;
}

std::optional<c10::IValue> evaluate(const Value* v) {
  const Node* n = v->node();
  if (n->kind() == c10::prim::Constant)
    return torch::jit::toIValue(v);
  torch::jit::Stack stack;
  for (const Value* in : n->inputs()) {
    auto iv = evaluate(in);
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
  return stack[v->offset()];
}

} // namespace

bool isConstantTensor(const Value* v) {
  return constantTensor(v, 0);
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

} // namespace xalloc::tspass
