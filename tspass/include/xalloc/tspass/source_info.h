// Where a TorchScript node came from: its original file:line:col (through the debug info that
// torch.jit.save keeps), the source line, the enclosing Python function, and the text of the
// expression. The same function feeds profiles, anchors and diffs, so they always agree.
#pragma once

#include <memory>
#include <string>

#include "xalloc/formats/types.h"

namespace torch::jit {
struct Graph;
struct Node;
} // namespace torch::jit

namespace xalloc::tspass {

struct NodeSource {
  formats::SourceLoc loc; // file, line, col (1-based), text of the whole line
  std::string function;   // "CausalSelfAttention.forward"; "" when unknown
  std::string expr;       // the expression's text, whitespace collapsed
};

/// The Python text of the sources a graph's nodes point into, decoded once per source. It holds
/// each source alive while cached, so a source freed and another allocated at its address can
/// never be mistaken for it (a process-wide cache keyed by address once gave one model's
/// anchors the text of another model's file, loaded earlier in the same process).
class SourceTextCache {
public:
  SourceTextCache();
  ~SourceTextCache();
  SourceTextCache(const SourceTextCache&) = delete;
  SourceTextCache& operator=(const SourceTextCache&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

private:
  std::unique_ptr<Impl> impl_;
};

/// Describes a node's original source. Nodes without a source range get an empty NodeSource.
NodeSource describeNode(const torch::jit::Node* node, SourceTextCache& cache);
NodeSource describeNode(const torch::jit::Node* node);

/// Module instance path of an inlined node ("0.attn.c_attn"), "" when not inlined: from its
/// inlined call stack, or else from the scope carryScopes gave it.
std::string moduleScope(const torch::jit::Node* node);

/// Saved code keeps source ranges but not inlined call stacks, so a graph loaded back from an
/// inlined model knows no module scopes. Gives each node of `to` the scope of the node of `from`
/// (the inlined graph it was saved from) at the same source position with the same kind: the
/// k-th such node takes the k-th one's scope when both graphs have as many; else, since loading
/// drops code that can never run, the k-th of the scopes with repeats collapsed (one per module,
/// in order) when those line up, or the scope they all share; else it stays unscoped.
void carryScopes(const torch::jit::Graph& from, torch::jit::Graph& to);

namespace detail {
/// Finds "Class.method" enclosing byte `offset` of Python source `text` by indentation.
std::string enclosingPythonFunction(const std::string& text, std::size_t offset);
/// Repairs a range's text into a whole expression: completes a cut identifier, closes brackets
/// (taking text from the source after `end`), and collapses whitespace.
std::string completeExpression(const std::string& text, std::size_t start, std::size_t end);
/// A traced model's source ranges hold the Python stack the tracer saw, innermost frame first
/// ("/src/model.py(63): forward", then the frames that called it), not source code. Returns the
/// innermost frame's function when `text` at `start` is such a frame, and "" otherwise.
std::string tracedFrameFunction(const std::string& text, std::size_t start);
} // namespace detail

} // namespace xalloc::tspass
