// What each op kind does with its tensors, in one torch-free table: one row per kind, one column
// per question the tools ask (ONNX Runtime's transpose optimizer keeps one handler per op kind in
// one table the same way). The profiler, the scheduler's rules and the graph rewriter read it;
// where the answer depends on an op's arguments (dropout in training, the tanh GELU), the
// graph side's handlers (tspass/layout_families.cpp) refine the row.
#pragma once

#include <string_view>
#include <vector>

namespace xalloc::formats {

/// How a layout passes through an op (layout regions: tspass/regions.h).
enum class OpFamily {
  None,   // fixes or changes the layout (view, permute, flatten, layer_norm, ...)
  Conv,   // aten::conv2d / conv3d: input 0 is the activation, weight and bias parameters
  Unary,  // activations and dropout in eval mode: input 0
  Binary, // add, sub, mul, div: every tensor input (broadcast operands keep their own)
  Norm,   // batch_norm in eval mode: input 0
  Pool,   // max/avg/adaptive pooling: input 0
  Linear, // aten::linear: a region of its own (its weight re-laid), never joined to others
  Concat, // aten::cat of a prim::ListConstruct read by it alone: the list's every tensor, and
          // the list itself (the cat's input 0); both join the region
};

struct OpFacts {
  const char* kind; // "aten::relu"; an in-place variant ("aten::relu_") shares its row
  /// Reads its tensor inputs' elements. False: it looks only at metadata (aten::size,
  /// prim::dtype, aten::stride), so converting an input never makes it faster.
  bool reads_elements = true;
  /// Its answer depends on strides or on which tensor object it is given (aten::stride,
  /// aten::is_contiguous, `is`): a conversion before it changes what it returns.
  bool sees_layout = false;
  /// Returns a view of its input (shares the storage) where it can.
  bool is_view = false;
  OpFamily family = OpFamily::None;
  /// The activation a packed convolution or linear can fuse for it ("relu", "silu", ...; see
  /// runtime/packed.h); "" when none.
  const char* fusible = "";
  /// libtorch 1.13 computes it on blocked (MKLDNN) tensors (frozen_ops_to_mkldnn.cpp's list).
  bool mkldnn = false;
  /// The runtime's op that replaces it on blocked tensors ("xalloc::blocked_relu"; the in-place
  /// variant adds "_"), where libtorch's MKLDNN form is wrong; "" to keep libtorch's.
  const char* blocked_form = "";
};

/// Every row, each kind once.
const std::vector<OpFacts>& opFactsTable();
/// The row of `kind` (an in-place variant's is its out-of-place row); nullptr for a kind the
/// table does not know: it reads elements, sees no layout, is no view and has no family.
const OpFacts* opFacts(std::string_view kind);
/// True when `kind` reads only metadata its layout does not change (sizes, rank, dtype, device):
/// a conversion before it neither helps it nor changes its answer.
bool readsOnlyLayoutFreeMetadata(std::string_view kind);
/// True when `kind` reads no elements (layout-free metadata, strides or identity).
bool readsNoElements(std::string_view kind);
/// True when `kind` is a view op.
bool isViewOp(std::string_view kind);
/// True when `kind` ends in the in-place "_" (and is not a dunder such as aten::__is__).
bool isInPlaceKind(std::string_view kind);

} // namespace xalloc::formats
