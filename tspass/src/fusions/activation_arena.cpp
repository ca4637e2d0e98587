// The graph bracketed by xalloc::activations_enter() and activations_exit() (rewrite.h's
// scopeActivations), so the tensors it allocates come from the runtime's activation arena: the
// last fusion after the fast form's regions.
#include <cstdint>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

bool scopeActivations(torch::jit::Graph& graph) {
  const auto enter = c10::Symbol::fromQualString("xalloc::activations_enter");
  const auto exit = c10::Symbol::fromQualString("xalloc::activations_exit");
  for (const torch::jit::Node* n : graph.nodes())
    if (n->kind() == enter)
      return false;
  graph.prependNode(graph.create(enter, 0));
  graph.create(exit, 0)->insertBefore(graph.return_node());
  return true;
}

std::int64_t bracketActivations(torch::jit::Graph& graph) {
  return scopeActivations(graph) ? 1 : 0;
}

} // namespace xalloc::tspass
