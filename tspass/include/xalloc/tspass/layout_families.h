// How a layout passes through each op family (as ONNX Runtime's transpose optimizer keeps a
// handler per op kind). An op of a family accepts its activation inputs in any layout and makes
// its outputs in that layout (ATen's kernels suggest the input's memory format for their output),
// with the same values: such ops form layout regions (regions.h). The table is data; the region
// builder and rewriter read it, never re-derive it op by op.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xalloc/formats/op_facts.h"

namespace torch::jit {
struct Node;
}

namespace xalloc::tspass {

using LayoutFamily = formats::OpFamily;

struct FamilyInfo {
  LayoutFamily family = LayoutFamily::None;
  bool in_place = false; // writes input 0 (relu_, add_, ...)
  /// The activation a packed convolution can fuse for this op ("relu", "silu", ...; see
  /// runtime/packed.h); empty when it cannot.
  std::string fusible;
  /// Runs on oneDNN's blocked (MKLDNN) tensors as libtorch 1.13's own pass runs it (the op
  /// then computes in that layout; others read a dense copy).
  bool mkldnn = false;
};

/// The family of `n` and what goes with it; family None for an op it does not know, or whose
/// arguments make it change the layout (dropout in training, pooling that returns indices).
FamilyInfo layoutFamily(const torch::jit::Node* n);

/// The inputs of `n` that carry the layout (activations), by index.
std::vector<std::size_t> activationInputs(const torch::jit::Node* n, LayoutFamily f);

/// Ops that read only metadata the layout does not change (sizes, rank, dtype; op_facts.h).
bool readsMetadataOnly(const torch::jit::Node* n);

} // namespace xalloc::tspass
