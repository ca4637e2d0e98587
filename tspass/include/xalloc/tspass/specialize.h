// A frozen model specialized to the inputs it is profiled and rewritten for, so that layout
// regions run through what the model's Python plumbing would otherwise cut:
// - a dict the graph builds and reads itself (torchvision's IntermediateLayerGetter, whose
//   "out" and "aux" feed a segmenter's head): each read of a constant key becomes the value last
//   stored under it, so the backbone and the head are one region;
// - `x.dim()` of a tensor whose rank follows from the inputs' ranks (ranks.h) becomes a
//   constant, and the branches it decides are inlined: F.interpolate's dispatch on the rank
//   (LR-ASPP's and FPN's upsampling sat in a prim::If outside every region), batch norm's check.
// xprof and xrewrite both run it on the frozen model, before numbering, with the same ranks, so
// they number the same ops; the rewritten model keeps the specialization (a second run changes
// nothing). The model then takes inputs of those ranks only, as the region's conversions do.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
} // namespace torch::jit

namespace xalloc::tspass {

struct LoadedModel;

struct Specialized {
  int dict_reads = 0; // reads of a dict's item now reading the stored value
  int rank_reads = 0; // aten::dim calls now constants
  bool changed() const { return dict_reads + rank_reads > 0; }
};

/// The passes on one graph (top-level dicts, ranks from `input_ranks`: each input's after
/// self), then constant branches inlined and dead code removed.
Specialized specializeGraph(const std::shared_ptr<torch::jit::Graph>& graph,
                            const std::vector<std::optional<int>>& input_ranks);

/// specializeGraph on `method` of a frozen model, then canonicalize (model_io.h) when it changed
/// anything, so the graph is numbered as any saved copy of it will be.
Specialized specializeToInputRanks(LoadedModel& model, const std::string& method,
                                   const std::vector<std::optional<int>>& input_ranks);

} // namespace xalloc::tspass
