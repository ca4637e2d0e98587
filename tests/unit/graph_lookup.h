// Finding ops and their outputs in a GraphIndex, for tests on small graphs.
#pragma once

#include <cstdint>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_index.h"

namespace xalloc::tspass::testing {

/// The position of the nth op of this kind, -1 when there is none.
inline std::int64_t opOf(const GraphIndex& index, c10::Symbol kind, int nth = 0) {
  for (std::size_t i = 0; i < index.ops().size(); ++i)
    if (index.ops()[i]->kind() == kind && nth-- == 0)
      return static_cast<std::int64_t>(i);
  return -1;
}

/// The output of the nth op of this kind.
inline const torch::jit::Value* outputOf(const GraphIndex& index, c10::Symbol kind, int nth = 0) {
  return index.ops()[static_cast<std::size_t>(opOf(index, kind, nth))]->output();
}

} // namespace xalloc::tspass::testing
