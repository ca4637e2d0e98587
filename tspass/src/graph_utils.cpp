// inlineMethod, useOriginalSourceRanges, graphText, allNodes, hasKind, constantInt.
#include "xalloc/tspass/graph_utils.h"

#include <regex>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
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
void collect(torch::jit::Block* block, std::vector<torch::jit::Node*>& out) {
  for (torch::jit::Node* n : block->nodes()) {
    out.push_back(n);
    for (torch::jit::Block* b : n->blocks())
      collect(b, out);
  }
}
} // namespace

std::vector<torch::jit::Node*> allNodes(torch::jit::Graph& graph) {
  std::vector<torch::jit::Node*> out;
  collect(graph.block(), out);
  return out;
}

bool hasKind(const torch::jit::Node* n, const char* kind) {
  return n->kind() == c10::Symbol::fromQualString(kind);
}

std::optional<std::int64_t> constantInt(const torch::jit::Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isInt())
    return std::nullopt;
  return iv->toInt();
}

void useOriginalSourceRanges(torch::jit::Graph& graph) {
  for (torch::jit::Node* n : allNodes(graph))
    n->setSourceRange(compat::originalRange(n->sourceRange()));
}

std::string graphText(const torch::jit::Graph& graph) {
  // A constant object (a packed convolution's weights) prints its address: not the same twice.
  static const std::regex address(R"(object\(0x[0-9a-f]+\))");
  return std::regex_replace(graph.toString(/*print_source_locations=*/true), address, "object");
}

} // namespace xalloc::tspass
