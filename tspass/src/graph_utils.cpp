// inlineMethod, useOriginalSourceRanges, graphText.
#include "xalloc/tspass/graph_utils.h"

#include <regex>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "xalloc/error.h"
#include "xalloc/torch_compat.h"

namespace xalloc::tspass {

std::shared_ptr<torch::jit::Graph> inlineMethod(torch::jit::Module& module,
                                                const std::string& method) {
  auto m = module.find_method(method);
  if (!m)
    throw InputError("", "the model has no method '" + method + "'");
  auto graph = m->graph();
  torch::jit::Inline(*graph);
  return graph;
}

namespace {
void useOriginalRanges(torch::jit::Block* block) {
  for (torch::jit::Node* n : block->nodes()) {
    n->setSourceRange(compat::originalRange(n->sourceRange()));
    for (torch::jit::Block* b : n->blocks())
      useOriginalRanges(b);
  }
}
} // namespace

void useOriginalSourceRanges(torch::jit::Graph& graph) {
  useOriginalRanges(graph.block());
}

std::string graphText(const torch::jit::Graph& graph) {
  // A constant object (a packed convolution's weights) prints its address: not the same twice.
  static const std::regex address(R"(object\(0x[0-9a-f]+\))");
  return std::regex_replace(graph.toString(/*print_source_locations=*/true), address, "object");
}

} // namespace xalloc::tspass
