// outVariantOf / fuseIntoProducer: a row-major conversion written by the producer itself.
#include "xalloc/tspass/producer_fusion.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/tspass/layout_families.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// `out` is `base` with one more, trailing, written-to tensor argument named "out".
bool extendsWithOut(const c10::FunctionSchema& base, const c10::FunctionSchema& out) {
  const auto& a = base.arguments();
  const auto& b = out.arguments();
  if (b.size() != a.size() + 1 || out.returns().size() != 1)
    return false;
  const c10::Argument& last = b.back();
  if (last.name() != "out" || !last.alias_info() || !last.alias_info()->isWrite() ||
      !last.type()->isSubtypeOf(*c10::TensorType::get()))
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name() != b[i].name() || *a[i].type() != *b[i].type())
      return false;
  return true;
}

bool pointwise(const Node* n) {
  const FamilyInfo f = layoutFamily(n);
  return (f.family == LayoutFamily::Unary || f.family == LayoutFamily::Binary) && !f.in_place;
}

} // namespace

std::string operatorName(const torch::jit::Operator& op) {
  const c10::FunctionSchema& s = op.schema();
  return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
}

std::shared_ptr<torch::jit::Operator> outVariantOf(const Node* producer) {
  if (!pointwise(producer) || producer->outputs().size() != 1 ||
      !producer->output()->type()->cast<c10::TensorType>())
    return nullptr;
  const c10::FunctionSchema* schema = producer->maybeSchema();
  if (!schema || schema->is_mutable())
    return nullptr;
  for (const auto& op : torch::jit::getAllOperatorsFor(producer->kind()))
    if (extendsWithOut(*schema, op->schema()))
      return op;
  return nullptr;
}

bool writesRowMajorItself(const Node* n) {
  if (n->inputs().empty() || !pointwise(n))
    return false;
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (!schema || schema->arguments().empty() || schema->arguments().back().name() != "out")
    return false;
  const Node* buffer = n->inputs().back()->node();
  if (buffer->kind() != c10::aten::empty_like || buffer->inputs().size() < 6)
    return false;
  auto fmt = torch::jit::toIValue(buffer->input(5));
  return fmt && fmt->isInt() && fmt->toInt() == static_cast<int64_t>(c10::MemoryFormat::Contiguous);
}

Value* fuseIntoProducer(Node* producer, std::size_t template_input) {
  auto op = outVariantOf(producer);
  if (!op || template_input >= producer->inputs().size() ||
      !producer->input(template_input)->type()->cast<c10::TensorType>())
    return nullptr;
  torch::jit::Graph* graph = producer->owningGraph();
  torch::jit::WithInsertPoint guard(producer);
  // aten::empty_like(Tensor self, *, ScalarType? dtype, Layout? layout, Device? device,
  //                  bool? pin_memory, MemoryFormat? memory_format)
  Value* none = graph->insertConstant(c10::IValue());
  Value* format = graph->insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
  Node* buffer = graph->create(c10::aten::empty_like,
                               {producer->input(template_input), none, none, none, none, format});
  buffer->output()->setType(c10::TensorType::get());
  buffer->setSourceRange(producer->sourceRange());
  buffer->setScope(producer->scope());
  graph->insertNode(buffer);
  std::vector<Value*> inputs(producer->inputs().begin(), producer->inputs().end());
  inputs.push_back(buffer->output());
  Node* fused = graph->create(producer->kind(), inputs, 1);
  fused->output()->setType(c10::TensorType::get()); // row-major now: not the old strides
  fused->setSourceRange(producer->sourceRange());
  fused->setScope(producer->scope());
  graph->insertNode(fused);
  const c10::FunctionSchema* resolved = fused->maybeSchema();
  if (!resolved || resolved->arguments().back().name() != "out") {
    fused->destroy();
    buffer->destroy();
    format->node()->destroy();
    none->node()->destroy();
    return nullptr;
  }
  const std::string name =
      producer->output()->hasDebugName() ? producer->output()->debugName() : std::string();
  producer->output()->replaceAllUsesWith(fused->output());
  producer->destroy();
  if (!name.empty())
    fused->output()->setDebugName(name);
  return fused->output();
}

} // namespace xalloc::tspass
