// Static ranks of a graph's tensor values (in loops and branches too): from the ranks of the inputs
// a model is run on, through the ops whose output rank follows from their arguments
// (layout_families.h's ops, views, flatten, cat, chunks). Region finding (regions.cpp) and rank
// specialization (specialize.cpp) read the same answer.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

class Ranks {
public:
  /// `input_ranks`: the rank of each graph input after `self` (nullopt: unknown).
  Ranks(torch::jit::Graph& g, const std::vector<std::optional<int>>& input_ranks);
  /// The rank of `v` when it is known here (a constant tensor's always).
  std::optional<int> of(const torch::jit::Value* v) const;

private:
  void set(const torch::jit::Value* v, std::optional<int> r);
  void visit(torch::jit::Node* n);
  std::unordered_map<const torch::jit::Value*, int> ranks_;
};

} // namespace xalloc::tspass
