// Which tensor values something may write to, as precisely as a static look at the graph allows.
// The JIT's alias analysis is sound but coarse: a tensor that ever enters a list or tuple joins a
// wildcard set, and then any in-place write to any module buffer (BatchNorm's
// num_batches_tracked.add_ in a training branch, say) counts as a write to it. MutationInfo keeps
// the alias analysis as the sound filter and refines it with memory roots: a write can only reach
// a value if the tensor it writes may share an allocation with that value.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
class AliasDb;
} // namespace torch::jit

namespace xalloc::tspass {

class MutationInfo {
public:
  explicit MutationInfo(const std::shared_ptr<torch::jit::Graph>& graph);
  ~MutationInfo();
  MutationInfo(const MutationInfo&) = delete;
  MutationInfo& operator=(const MutationInfo&) = delete;

  /// Something may write to the memory this value points to (directly or through an alias):
  /// converting or un-converting it could change what that write affects.
  bool hasWriters(const torch::jit::Value* v) const;

  /// The allocations a tensor value may point into: ids of fresh op outputs, one id per graph
  /// input, one id for all module state; {-1} when unknown (aliases everything).
  std::vector<long> memoryRoots(const torch::jit::Value* v) const;

private:
  struct Writer {
    torch::jit::Node* node;
    std::vector<const torch::jit::Value*> written; // tensors whose memory the node writes
  };
  void collectWriters(torch::jit::Node* n);

  std::shared_ptr<torch::jit::Graph> graph_;
  std::unique_ptr<torch::jit::AliasDb> db_;
  std::vector<Writer> writers_;
  mutable std::unordered_map<const torch::jit::Value*, std::vector<long>> roots_;
};

} // namespace xalloc::tspass
