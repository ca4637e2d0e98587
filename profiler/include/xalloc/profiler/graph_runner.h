// A profiling interpreter for inlined TorchScript graphs: runs one node at a time through the
// same registered operators the JIT interpreter calls, so every op can be timed on its own,
// every intermediate value captured, and any single op re-run in isolation on captured inputs.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include "xalloc/tspass/graph_index.h"

namespace xalloc::profiler {

class GraphRunner {
public:
  /// Prepares to run `index`'s graph. Throws InputError naming the first op it cannot run.
  explicit GraphRunner(const tspass::GraphIndex& index);
  ~GraphRunner();

  struct Options {
    bool keep_values = false; // keep every intermediate (else free after last use)
    bool time_ops = false;    // wall time per op
    bool cpu_time = false;    // process CPU time per op
  };
  struct Trace {
    std::vector<double> op_ms;         // per op id, exclusive of nested blocks
    std::vector<double> op_cpu_ms;     // per op id
    std::vector<double> op_start_ms;   // per op id, from the start of the run; -1: not executed
    std::vector<std::int64_t> op_runs; // per op id: times it ran (loop trips; 0: not reached)
    std::chrono::steady_clock::time_point run_start;
    std::unordered_map<const torch::jit::Value*, c10::IValue> values;
    /// With keep_values: per value an op made, the tensor bytes it made summed over every time
    /// the op ran (a loop's trips), where `values` holds one of them (the heaviest trip's).
    std::unordered_map<const torch::jit::Value*, std::int64_t> bytes_made;
    /// With keep_values: per branch of an if inside a loop, the values its ops read and made on
    /// the first trip that took it (`values` holds the loop's heaviest trip, which may not have:
    /// SSD's head picks one branch per feature level).
    std::unordered_map<const torch::jit::Block*,
                       std::unordered_map<const torch::jit::Value*, c10::IValue>>
        branch_values;
  };

  /// Runs the graph. `inputs` are the graph's inputs, the module object first.
  std::vector<c10::IValue> run(const std::vector<c10::IValue>& inputs, const Options& options,
                               Trace* trace) const;

  /// Runs one (non-control-flow) op on the given input values and returns its outputs.
  std::vector<c10::IValue> runOp(const torch::jit::Node* node, torch::jit::Stack inputs) const;

  /// The memory of the module's tensors in a finished run with keep_values: the attributes the
  /// graph read and its constant tensors. Values in it are weights (or views of them), not
  /// activations.
  std::set<const c10::StorageImpl*> moduleStorages(const Trace& trace) const;

  /// A value of a finished run with keep_values (constants included). Given the `block` that
  /// reads it, the value that block's ops saw where it is a branch inside a loop (the trip
  /// that took it; Trace::branch_values), else the run's.
  const c10::IValue& valueOf(const Trace& trace, const torch::jit::Value* v,
                             const torch::jit::Block* block = nullptr) const;
  /// False for values the run never computed (they sit in a branch that was not taken).
  bool hasValue(const Trace& trace, const torch::jit::Value* v,
                const torch::jit::Block* block = nullptr) const;

  /// True when runOp can run this node in isolation: a registered op (ATen's or a custom op
  /// library's) that writes none of its inputs and has no side effects.
  static bool canRunInIsolation(const torch::jit::Node* node);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The storage a tensor lives in (views share their base's); nullptr when it has none.
const c10::StorageImpl* storageOf(const at::Tensor& t);

/// The view ops that made `v` from a tensor it shares storage with, oldest first ("aten::view",
/// "aten::transpose"), followed back through the trace's values (at most 16 steps).
std::vector<std::string> viewChain(const torch::jit::Value* v, const GraphRunner::Trace& t);

} // namespace xalloc::profiler
