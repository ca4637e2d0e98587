// Small helpers around TorchScript graphs that several parts need: inlining a module's method
// for editing, pointing every node at its original source range, and printing a graph with its
// original file:line:col locations (for readable before/after diffs).
#pragma once

#include <memory>
#include <string>

namespace torch::jit {
struct Graph;
struct Module;
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

} // namespace xalloc::tspass
