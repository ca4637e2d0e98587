// GraphIndex: op/value numbering, sources and anchors of an inlined graph.
#include "xalloc/tspass/graph_index.h"

#include <map>
#include <tuple>

#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

GraphIndex::GraphIndex(torch::jit::Graph& graph) : graph_(&graph) {
  for (const Value* v : graph.inputs()) {
    value_ids_[v] = static_cast<std::int64_t>(values_.size());
    values_.push_back(v);
  }
  visitBlock(graph.block(), false);
  computeAnchors();
}

void GraphIndex::visitBlock(Block* block, bool in_loop) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::Constant)
      continue;
    op_ids_[n] = static_cast<std::int64_t>(ops_.size());
    ops_.push_back(n);
    in_loop_.push_back(in_loop);
    for (const Value* v : n->outputs()) {
      value_ids_[v] = static_cast<std::int64_t>(values_.size());
      values_.push_back(v);
    }
    bool body_in_loop = in_loop || n->kind() == c10::prim::Loop;
    for (Block* b : n->blocks()) {
      for (const Value* v : b->inputs()) {
        value_ids_[v] = static_cast<std::int64_t>(values_.size());
        values_.push_back(v);
      }
      visitBlock(b, body_in_loop);
    }
  }
}

std::int64_t GraphIndex::opId(const Node* n) const {
  auto it = op_ids_.find(n);
  return it == op_ids_.end() ? -1 : it->second;
}

std::int64_t GraphIndex::valueId(const Value* v) const {
  auto it = value_ids_.find(v);
  return it == value_ids_.end() ? -1 : it->second;
}

void GraphIndex::computeAnchors() {
  sources_.reserve(ops_.size());
  scopes_.reserve(ops_.size());
  anchors_.resize(ops_.size());
  SourceTextCache texts;
  for (Node* n : ops_) {
    sources_.push_back(describeNode(n, texts));
    scopes_.push_back(moduleScope(n));
  }
  // A node without a source range (ListUnpack, ListConstruct, ...) borrows the location of the
  // op that produced its first input, so `q, k, v = x.split(...)` anchors at the split.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::int64_t> seen;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    Node* n = ops_[i];
    const NodeSource* src = &sources_[i];
    for (Node* cur = n; !src->loc.known() && cur->inputs().size() > 0;) {
      cur = cur->input(0)->node();
      auto id = opId(cur);
      if (id < 0)
        break;
      src = &sources_[static_cast<std::size_t>(id)];
    }
    formats::Anchor& a = anchors_[i];
    a.file = src->loc.file;
    a.function = src->function;
    a.expr = src->expr;
    a.op = n->kind().toQualString();
    a.line = src->loc.line;
    a.col = src->loc.col;
    a.ordinal = seen[{a.file, a.function, a.expr, a.op}]++;
  }
}

std::vector<Node*> GraphIndex::findByAnchor(const formats::Anchor& a) const {
  std::vector<Node*> out;
  for (std::size_t i = 0; i < ops_.size(); ++i)
    if (anchors_[i].sameSite(a))
      out.push_back(ops_[i]);
  return out;
}

std::vector<Node*> GraphIndex::findAt(const formats::Anchor& a) const {
  std::vector<Node*> out;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const formats::Anchor& b = anchors_[i];
    if (b.file == a.file && b.function == a.function && b.expr == a.expr && b.line == a.line &&
        b.col == a.col)
      out.push_back(ops_[i]);
  }
  return out;
}

} // namespace xalloc::tspass
