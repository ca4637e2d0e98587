// What the region layouts (layouts/*.cpp) build their edits from: placing nodes so that they
// appear in the diff, constants at the top of the graph, conversions shared between users, the
// constant parameters of a convolution, and the steps several layouts take (packing, re-laying
// weights, converting entries and exits).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/regions.h"

namespace xalloc::tspass::layouts {

using torch::jit::Node;
using torch::jit::Value;

c10::Symbol sym(const char* qual);
bool isInPlaceWriteOf(const Node* n, const Value* v);
/// Inserts `n` before `before`; as `anchor` is in the diff, `n` borrows its source range and
/// module scope.
Node* place(Node* n, Node* before, Node* anchor);
/// The top-level node `u` sits in (u itself, or the block owner above it).
Node* topLevel(Node* u, const torch::jit::Block* top);
/// A constant at the top of the graph, where it dominates every use.
Value* topConstant(torch::jit::Graph& g, const c10::IValue& v);
/// An unplaced aten::contiguous(v, mf).
Node* contiguousNode(torch::jit::Graph& g, Value* v, c10::MemoryFormat mf);
/// A constant list of ints, or one built by prim::ListConstruct of constants.
std::optional<std::vector<std::int64_t>> intList(const Value* v);
std::optional<at::Tensor> constantTensor(const Value* v);

/// A convolution's weight, bias (none: undefined) and parameters when all are constants.
struct ConvParams {
  at::Tensor weight;
  c10::optional<at::Tensor> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
};
std::optional<ConvParams> convParams(const Node* n);

/// `old_node`'s output now comes from `new_node`, in the graph and in `nodes`; old_node goes.
void replaceNode(Node* old_node, Node* new_node, std::vector<Node*>& nodes);
/// `n` goes, its readers reading `replacement`.
void dropNode(Node* n, Value* replacement, std::vector<Node*>& nodes);
/// `n`, read by nothing now, goes from the graph and from `nodes`.
void removeNode(Node* n, std::vector<Node*>& nodes);
/// aten::conv2d or aten::conv3d.
bool isConv(const Node* n);
/// Nothing after `from` up to `to` (exclusive, in one block) writes any of `vs` or what it
/// aliases: a read moved from `to` back to `from`, or on from `from` to `to`, reads the same.
/// False when the walk meets the block's end before `to`.
bool unwrittenBetween(Node* from, const Node* to, const torch::jit::ValueSet& vs,
                      const torch::jit::AliasDb& alias);
/// The region's ops that write their input in place.
std::vector<Node*> inPlaceWriters(const LayoutRegion& r);

/// Conversions of values for their users, shared by the users that come after one conversion
/// unless something in between writes the value in place (it would then read a stale copy).
class Converter {
public:
  /// `top`: the block the region's ops are in (the graph's, or a loop's or branch's).
  Converter(const std::vector<Node*>& writers, const torch::jit::Block* top)
      : writers_(writers), top_(top) {}

  /// `make(v)` creates (unplaced) the conversion node of v; it is placed before the node of the
  /// region's block that `user` is (or sits in). Returns the converted value.
  Value* convert(Value* v, Node* user, const std::string& key,
                 const std::function<Node*(Value*)>& make);
  std::int64_t count() const { return count_; }

private:
  bool writtenBetween(const Value* v, const Node* from, const Node* to) const;
  const std::vector<Node*>& writers_;
  const torch::jit::Block* top_;
  std::map<std::pair<const Value*, std::string>, std::vector<Node*>> made_;
  std::int64_t count_ = 0;
};

/// Replaces each `kind` op of the region by `packed_kind` reading the constant `pack` makes
/// (None when the op's parameters are not constants: it stays), fusing the activation that is
/// its only reader; `pack` gets the op and the fused activation's name ("none" when none).
void packOps(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e, const char* kind,
             const char* packed_kind,
             const std::function<c10::IValue(const Node*, const std::string& post)>& pack);
/// A runtime::PackedConv of the aten::conv2d or aten::conv3d `conv` with post-op `post` ("relu",
/// "add+relu", ...); None when its parameters are not constants.
c10::IValue packedConv(const Node* conv, const std::string& post);
/// packOps for convolutions: each aten::conv2d (conv3d) with constant parameters becomes
/// xalloc::conv2d_packed (conv3d_packed) with a runtime::PackedConv, its activation fused.
void packConvs(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e);
/// The runtime op a packed aten::conv2d or conv3d becomes (its _add form when `add`).
const char* packedConvKind(const Node* conv, bool add);
/// True for any of the runtime's packed convolutions (2-D, 3-D, with a residual add or not).
bool isPackedConv(const Node* n);
/// Each aten::max_pool2d of the region becomes the runtime's xalloc::max_pool2d: the same
/// result without the indices ATen computes and drops (channels-last float; ATen's otherwise).
void poolWithoutIndices(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e);
/// Re-lays each constant convolution weight in the memory format the region runs in.
void relayWeights(torch::jit::Graph& g, LayoutRegion& r, c10::MemoryFormat mf, RegionEdit& e);
/// The region's exits, converted by `make` for every reader outside it.
void convertExits(LayoutRegion& r, Converter& conv, const std::function<Node*(Value*)>& make,
                  RegionEdit& e);
/// A region in a channels-last memory format: its entries converted (round trips through
/// row-major removed), `between` (packing) run, weights re-laid, exits made row-major again.
RegionEdit applyChannelsLast(torch::jit::Graph& g, LayoutRegion& r, c10::MemoryFormat mf,
                             const std::function<void(RegionEdit&)>& between);
/// True when `now`, at the place of a convolution `was`, reads a constant weight laid out in
/// `mf` (a channels-last rewrite was applied before).
bool weightLaidOutIn(const Node* now, const std::string& was, c10::MemoryFormat mf);
/// True when each of the region's entries comes out of an aten::contiguous to `mf`.
bool entriesConvertedTo(const LayoutRegion& r, c10::MemoryFormat mf);

} // namespace xalloc::tspass::layouts
