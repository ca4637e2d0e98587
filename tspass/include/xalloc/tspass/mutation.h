// Which tensor values something may write to, as precisely as a static look at the graph allows.
// The JIT's alias analysis is sound but coarse: a tensor that ever enters a list or tuple joins a
// wildcard set, and then any in-place write to any module buffer (BatchNorm's
// num_batches_tracked.add_ in a training branch, say) counts as a write to it. MutationInfo keeps
// the alias analysis as the sound filter and refines it with memory roots: a write can only reach
// a value if the tensor it writes may share an allocation with that value.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch::jit {
struct Graph;
struct Module;
struct Node;
struct Value;
class AliasDb;
} // namespace torch::jit

namespace xalloc::tspass {

class MutationInfo {
public:
  /// `self`, when given, is the module whose method `graph` is (its first input): a tensor
  /// attribute read through a chain of prim::GetAttr from it then has its own memory root, one
  /// per storage (attributes that share a storage, like tied weights, share it), so a write to
  /// one buffer (BatchNorm's running statistics) is not a write to every parameter. Without it,
  /// all module state is one root. An attribute the graph assigns something that may hold a
  /// tensor (prim::SetAttr, on any object; flags and numbers do not count) holds, when read,
  /// what it held at load time or any of the values the graph assigns it (in this run or an
  /// earlier one); an object read out of such an attribute may be anything.
  explicit MutationInfo(const std::shared_ptr<torch::jit::Graph>& graph,
                        const torch::jit::Module* self = nullptr);
  ~MutationInfo();
  MutationInfo(const MutationInfo&) = delete;
  MutationInfo& operator=(const MutationInfo&) = delete;

  /// Something may write to the memory this value points to (directly or through an alias):
  /// converting or un-converting it could change what that write affects.
  bool hasWriters(const torch::jit::Value* v) const;

  /// The allocations a tensor value may point into: ids of fresh op outputs, one id per graph
  /// input, one id per storage of a resolved tensor attribute (or of the tensors of a list or
  /// tuple attribute), one id for any other module state (which may be any attribute); {-1}
  /// when unknown (aliases everything).
  std::vector<long> memoryRoots(const torch::jit::Value* v) const;

private:
  struct Writer {
    torch::jit::Node* node;
    std::vector<const torch::jit::Value*> written; // tensors whose memory the node writes
  };
  void collectWriters(torch::jit::Node* n);
  void collectStores(torch::jit::Node* n);
  void resolve(const std::vector<const torch::jit::Value*>& containers);

  std::shared_ptr<torch::jit::Graph> graph_;
  std::unique_ptr<torch::jit::AliasDb> db_;
  std::vector<long> attributeRoots(const torch::jit::Value* v) const;
  std::vector<long> assignedAttributeRoots(const torch::jit::Value* v) const;

  std::vector<Writer> writers_;
  const torch::jit::Module* self_ = nullptr; // nullptr: all module state is one root
  /// Attributes the graph assigns (prim::SetAttr), by name on any object, and what it assigns
  /// them: read back, such an attribute holds one of those, or what a previous run assigned.
  std::unordered_map<std::string, std::vector<const torch::jit::Value*>> assigned_;
  /// An assigned attribute's roots beyond module state and the inputs: those of its values.
  std::unordered_map<std::string, std::vector<long>> assigned_roots_;
  mutable std::unordered_map<const void*, long> storage_roots_;
  mutable std::unordered_map<const torch::jit::Value*, std::vector<long>> roots_;
  /// Nodes that put values into a list or dict in place (`lst.append(t)`, `d[k] = t`): the
  /// container, and what goes into it.
  std::vector<std::pair<const torch::jit::Value*, std::vector<const torch::jit::Value*>>> stores_;
  /// A container's roots beyond what it was made from: those of everything stored into it.
  std::unordered_map<const torch::jit::Value*, std::vector<long>> stored_roots_;
  std::vector<const torch::jit::Node*> loops_; // every prim::Loop of the graph
  /// A loop-carried value's roots: its initial value's and those of what the body hands on.
  std::unordered_map<const torch::jit::Value*, std::vector<long>> carried_roots_;
};

} // namespace xalloc::tspass
