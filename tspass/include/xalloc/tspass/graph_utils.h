// Small helpers around TorchScript graphs that several parts need: inlining a module's method
// for editing, pointing every node at its original source range, printing a graph with its
// original file:line:col locations (for readable before/after diffs), every node of every block,
// and reading a node's kind and constant ints.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct Module;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

/// Inlines the method's graph in place (so the saved module keeps the edit) and returns it.
/// Must run before the method is first called: the executor caches an optimized copy.
std::shared_ptr<torch::jit::Graph> inlineMethod(torch::jit::Module& module,
                                                const std::string& method);

/// Sets every node's source range to the range it was generated from (the user's .py file),
/// so printing and saving refer to the original source directly.
void useOriginalSourceRanges(torch::jit::Graph& graph);

/// The graph as text, one node per line, with "# file:line:col" of each node.
std::string graphText(const torch::jit::Graph& graph);

/// Every node of the graph, those in the blocks of if and loop nodes included, in graph order (a
/// node before the nodes of its blocks): collected first, so a pass may edit them as it goes.
std::vector<torch::jit::Node*> allNodes(torch::jit::Graph& graph);

/// True when `n` is the op `kind` ("aten::cat").
bool hasKind(const torch::jit::Node* n, const char* kind);

/// The value as a constant int, or nullopt.
std::optional<std::int64_t> constantInt(const torch::jit::Value* v);

} // namespace xalloc::tspass
