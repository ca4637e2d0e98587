// Layout regions of an inlined (frozen) graph: ops that accept and keep a layout, connected
// through the 4-D (5-D) tensors they pass each other. What each op family does with a layout is
// said once, in layout_families.h; this file finds the regions, takes one out as a graph of its
// own (to time it in isolation), and rewrites one in place to run in another layout, with
// conversions at its entries and exits only. xprof and xrewrite both call these, so what is
// measured is what is written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>

#include "xalloc/formats/region.h"

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

class GraphIndex;

struct LayoutRegion {
  /// Graph order; all in one block: the graph's, or a loop's or branch's (a detector's head,
  /// run once per feature level in a loop, is a region there; its conversions are made in the
  /// loop, each trip).
  std::vector<torch::jit::Node*> nodes;
  /// 4: channels_last; 5: channels_last_3d; 0: a linear with a constant weight (and the
  /// activation after it), or a self-attention block with constant projections, whose
  /// activations stay row-major and whose weights can be packed.
  int rank = 4;
  std::int64_t convolutions = 0;
  /// False when a path leaves the region and comes back into it: it cannot run as a graph of
  /// its own, so it is not measured (and so never chosen).
  bool convex = true;
};

/// The tensors a region reads from outside it (activations of its rank; not constants).
std::vector<torch::jit::Value*> regionEntries(const LayoutRegion& r);
/// The values made in the region and read outside it (or returned), other than by ops that read
/// only their metadata (aten::size, aten::dim).
std::vector<torch::jit::Value*> regionExits(const LayoutRegion& r);

/// The regions of each block of `graph` (ops of one block joined through the tensors they pass
/// each other) that hold at least one convolution, and as regions
/// of their own each linear whose weight is a constant (a frozen model's) and each self-attention
/// block (aten::_native_multi_head_attention, wherever it sits) with constant projections, no
/// mask and no attention weights wanted; in graph order.
/// `input_ranks`: the rank of each graph input after `self` (nullopt: unknown), from the inputs
/// the model is run on. A convolution whose input's rank is unknown (a detector's image batched
/// from a list) takes its constant weight's (4-D: conv2d, 5-D: conv3d), batched; xprof checks
/// that on the values the region gets. Other tensors of unknown rank never enter a region.
std::vector<LayoutRegion> findLayoutRegions(torch::jit::Graph& graph,
                                            const std::vector<std::optional<int>>& input_ranks);

/// Which regions read each exit of each region, for the scheduler's border accounting: exit k of
/// region i reaches region j when one of j's ops reads it, directly or through ops outside every
/// region that hand on the same elements in whatever layout they come (a chunk or split of
/// channels and its unpacking, a row-major aten::contiguous, the channel-shuffle idiom's views,
/// transpose and copy), and only by such paths: an exit that any other op reads (or the graph
/// returns) keeps its conversion, and shares no border. When i and j run in one channels-last
/// layout, the rewrite converts neither i's exit nor j's entry there (the round trip, the
/// shuffle and the packed entries passes of rewrite.h): both conversions their measurements
/// counted are saved. Per region, in `regions`' order, (exit index, region index) pairs, each
/// once.
std::vector<std::vector<std::pair<std::size_t, std::size_t>>>
regionBorders(const std::vector<LayoutRegion>& regions);

/// The region as the documents name it: its ops' anchors in `index` (the same graph).
formats::RegionRef regionRef(const LayoutRegion& r, const GraphIndex& index, std::int64_t id);

/// True when `r`'s ops are exactly those `ref` names (anchors, op kinds and order).
bool sameRegion(const LayoutRegion& r, const GraphIndex& index, const formats::RegionRef& ref);

/// A region taken out as a graph of its own: inputs are the region's entries and the other
/// non-constant values it reads from outside (in that order), its output its exit (a tuple of
/// them when there are several); constants are copied. `region` is the same region in the new
/// graph.
struct ExtractedRegion {
  std::shared_ptr<torch::jit::Graph> graph;
  LayoutRegion region;
  std::vector<torch::jit::Value*> inputs; // the values of the original graph each input stands for
  std::vector<torch::jit::Value*> outputs;
};
ExtractedRegion extractRegion(const LayoutRegion& r);

/// What rewriting a region did.
struct RegionEdit {
  bool applied = false;
  std::int64_t entry_conversions = 0;
  std::int64_t exit_conversions = 0;
  std::int64_t weights_relaid = 0; // convolution weights stored in the target layout
  std::int64_t packed = 0;         // convolutions now xalloc::conv2d_packed
  std::int64_t fused = 0;          // activations fused into them
  std::int64_t blocked_ops = 0;    // ops now computing on oneDNN's blocked tensors
  std::int64_t pools = 0;          // max poolings now xalloc::max_pool2d (no indices)
  /// Row-major aten::contiguous calls at its entries that only undid the target layout, gone.
  std::int64_t removed_conversions = 0;
  std::string message; // why nothing was done, when nothing was
};

/// Rewrites region `r` of `graph` in place to run in `c`'s layout (region_layouts.h: one object
/// per layout does the edit). `r.nodes` is updated to the region's ops after the edit.
/// Contiguous: does nothing. Needs constant weights (a frozen model) to re-lay them; the packed
/// layouts and blocked need the runtime (libxalloc_runtime.so, linked).
RegionEdit applyRegionLayout(torch::jit::Graph& graph, LayoutRegion& r,
                             const formats::RegionCandidate& c);

/// True when a graph already runs this region in another layout (a second xrewrite), as one of
/// the region layouts (region_layouts.h) tells it: `found`, the region found again by its ops,
/// reads its entries in that layout; or, not found, one of the ops `ref` names is now a packed
/// or blocked op, or reads a re-laid weight.
bool regionAlreadyLaidOut(const LayoutRegion* found, const GraphIndex& index,
                          const formats::RegionRef& ref);

/// Why findLayoutRegions found no region in `graph`, in one line naming the real reason (no
/// convolution at all, none whose input rank is known, padding given as a string), for the
/// profile's note.
std::string whyNoRegion(torch::jit::Graph& graph);

/// The rank of each input of `method`'s graph after self, from the values it will be run on
/// (nullopt for non-tensors).
std::vector<std::optional<int>> inputRanks(const std::vector<c10::IValue>& inputs);

} // namespace xalloc::tspass
