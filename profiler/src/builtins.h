// The JIT interpreter's builtins (prim::ListUnpack, prim::TupleConstruct, aten::wait, ...):
// instructions of the interpreter rather than registered operators, which GraphRunner runs
// itself. Internal to the profiler.
#pragma once

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace xalloc::profiler::detail {

/// Nodes the JIT interpreter executes with its own instructions instead of registered
/// operators; GraphRunner runs them with runBuiltin.
bool isBuiltin(const torch::jit::Node* n);

/// Runs a builtin on `stack` (its inputs) and leaves its outputs there.
void runBuiltin(const torch::jit::Node* n, torch::jit::Stack& stack);

} // namespace xalloc::profiler::detail
