// A stable numbering of an inlined TorchScript graph: op ids (pre-order over nodes and nested
// blocks, constants left out), value ids, and per-op source descriptions and anchors. xprof and
// xrewrite both build it, so ids and anchors in the documents mean the same nodes for both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "xalloc/formats/types.h"
#include "xalloc/tspass/source_info.h"

namespace torch::jit {
struct Block;
struct Graph;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

class GraphIndex {
public:
  explicit GraphIndex(torch::jit::Graph& graph);

  torch::jit::Graph& graph() const { return *graph_; }
  const std::vector<torch::jit::Node*>& ops() const { return ops_; }
  const std::vector<const torch::jit::Value*>& values() const { return values_; }

  /// -1 when the node is not an op (a constant, or not in this graph).
  std::int64_t opId(const torch::jit::Node* n) const;
  /// -1 when the value has no id (constant outputs).
  std::int64_t valueId(const torch::jit::Value* v) const;

  const NodeSource& source(std::int64_t op_id) const { return sources_.at(op_id); }
  const formats::Anchor& anchor(std::int64_t op_id) const { return anchors_.at(op_id); }
  const std::string& scope(std::int64_t op_id) const { return scopes_.at(op_id); }
  /// True when the op sits inside a prim::Loop body.
  bool inLoop(std::int64_t op_id) const { return in_loop_.at(op_id); }

  /// Ops whose anchor names the same site (line and column ignored); usually zero or one.
  std::vector<torch::jit::Node*> findByAnchor(const formats::Anchor& a) const;
  /// Ops at the place `a` names (file, function, expression, line and column), whatever their
  /// kind now: what a rewrite made of the op that was there.
  std::vector<torch::jit::Node*> findAt(const formats::Anchor& a) const;

private:
  void visitBlock(torch::jit::Block* block, bool in_loop);
  void computeAnchors();

  torch::jit::Graph* graph_;
  std::vector<torch::jit::Node*> ops_;
  std::vector<const torch::jit::Value*> values_;
  std::unordered_map<const torch::jit::Node*, std::int64_t> op_ids_;
  std::unordered_map<const torch::jit::Value*, std::int64_t> value_ids_;
  std::vector<NodeSource> sources_;
  std::vector<formats::Anchor> anchors_;
  std::vector<std::string> scopes_;
  std::vector<bool> in_loop_;
};

} // namespace xalloc::tspass
