// One ulp at every layer's output (layer_noise.h).
#include "xalloc/tspass/layer_noise.h"

#include <limits>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isLayer(const Node* n) {
  static const char* const kinds[] = {"aten::conv1d", "aten::conv2d", "aten::conv3d",
                                      "aten::linear", "aten::matmul", "aten::addmm",
                                      "aten::bmm"};
  for (const char* k : kinds)
    if (hasKind(n, k))
      return n->outputs().size() == 1 && n->output()->type()->cast<c10::TensorType>();
  return false;
}

// where(|x| < tiny, x, nextafter(x, where(rand_like(x) > 0.5, inf, -inf))), inserted at the
// graph's insertion point.
Value* oneUlpAway(torch::jit::Graph& g, Value* x) {
  using c10::Symbol;
  const double inf = std::numeric_limits<double>::infinity();
  auto op = [&](const char* name, std::initializer_list<torch::jit::NamedValue> args) {
    return g.insert(Symbol::fromQualString(name), args);
  };
  Value* up = op("aten::gt", {op("aten::rand_like", {x}), 0.5});
  Value* toward =
      op("aten::where", {up, op("aten::full_like", {x, inf}), op("aten::full_like", {x, -inf})});
  Value* moved = op("aten::nextafter", {x, toward});
  // Zeros and subnormals stay: no rounding made them (a relu's zeros), and subnormals run ~100x
  // slower on x86 (float32's smallest normal; a double layer keeps a little more).
  Value* small = op("aten::lt", {op("aten::abs", {x}), std::numeric_limits<float>::min()});
  return op("aten::where", {small, x, moved});
}

} // namespace

int moveLayerOutputsOneUlp(torch::jit::Graph& graph) {
  int moved = 0;
  for (Node* n : allNodes(graph)) {
    if (!isLayer(n))
      continue;
    Value* y = n->output();
    const auto uses = y->uses();
    torch::jit::WithInsertPoint at(n->next());
    Value* away = oneUlpAway(graph, y);
    for (const auto& u : uses)
      u.user->replaceInput(u.offset, away);
    ++moved;
  }
  return moved;
}

} // namespace xalloc::tspass
