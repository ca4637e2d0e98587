// The TorchScript graph pass that writes a schedule back into a graph: `sync` inserts one
// aten::contiguous before the value's first listed consumer and rewires the listed consumers to
// it; `remove` drops an existing aten::contiguous. Decisions are found by source anchor, never by
// raw id, so the pass is idempotent: on its own output it changes nothing.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "xalloc/formats/schedule.h"
#include "xalloc/tspass/fusions.h"

namespace torch::jit {
struct Graph;
struct Module;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

enum class ApplyStatus {
  Applied,        // the graph changed
  AlreadyApplied, // the graph already does what the decision asks
  NotFound,       // the site is not in this graph (for remove: nothing left to remove)
  Skipped,        // the edit would be unsafe or the graph does not match; reported, not guessed
};
const char* applyStatusName(ApplyStatus s);

struct ApplyResult {
  std::size_t decision_index = 0;
  formats::Action action = formats::Action::None;
  ApplyStatus status = ApplyStatus::Skipped;
  std::string message;
  formats::Anchor anchor;
};

struct ApplyReport {
  std::vector<ApplyResult> results;
  /// The fusions that ran after the regions (fusions.h), with how many places each rewrote:
  /// none when no region ran the runtime's ops.
  std::vector<FusionRun> fusions;
  std::size_t count(ApplyStatus s) const;
  bool changed() const { return count(ApplyStatus::Applied) > 0; }
};

struct ApplyOptions {
  /// Portable form: async decisions become sync (only aten:: ops in the output).
  bool async_as_sync = true;
  /// The module whose method the graph is: tensor attributes then alias only what shares
  /// their storage (MutationInfo), as xprof judged them.
  const torch::jit::Module* module = nullptr;
};

/// Applies `schedule` to an inlined graph in place.
ApplyReport applySchedule(const std::shared_ptr<torch::jit::Graph>& graph,
                          const formats::Schedule& schedule, const ApplyOptions& options = {});

/// Applies the schedule's region decisions (sync with a `region`) to a frozen, inlined graph in
/// place: each region found again by its ops' anchors (regions.h) and rewritten to run in its
/// target. `input_ranks`: the ranks of the method's inputs after self (what the regions were
/// found with). `fast_form`: the runtime's ops may be written (packed and blocked regions);
/// else those decisions are skipped. A graph that is not frozen skips them all (its weights are
/// attributes, not constants that can be re-laid once). When a region applied runs the
/// runtime's ops, the fusions run after the regions (fusions.h), all but those named in
/// `fusions_off`.
ApplyReport applyRegionDecisions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                                 const std::vector<std::optional<int>>& input_ranks, bool frozen,
                                 bool fast_form, const std::set<std::string>& fusions_off = {});

/// applyRegionDecisions in two steps, for a graph that other edits change in between (xrewrite:
/// the value decisions, which expose and restore linears and so renumber them): the regions are
/// found by anchor on the graph as xprof numbered it and their ops marked (a node attribute that
/// exposing and restoring a linear carries over); applyMarkedRegions then rewrites the marked
/// ops and clears every mark.
struct MarkedRegions {
  ApplyReport report;              // the decisions not to apply (skipped, applied, not found)
  std::vector<std::size_t> marked; // decisions whose ops are marked
};
MarkedRegions markRegionDecisions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                                  const std::vector<std::optional<int>>& input_ranks, bool frozen,
                                  bool fast_form);
ApplyReport applyMarkedRegions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                               const MarkedRegions& marked,
                               const std::set<std::string>& fusions_off = {});

/// Brackets the graph with xalloc::activations_enter() first and xalloc::activations_exit()
/// before its return, so the tensors it allocates come from the runtime's activation cache
/// (xalloc/runtime/activation_cache.h). The region decisions do it when a region they applied
/// runs the runtime's ops. False when the graph has them already.
bool scopeActivations(torch::jit::Graph& graph);
/// scopeActivations as the `activation_arena` fusion (fusions.h): 1 when it bracketed the graph.
std::int64_t bracketActivations(torch::jit::Graph& graph);

/// Each channel shuffle written as ShuffleNet writes it (`x.view(b, g, c // g, h, w)`,
/// `transpose(1, 2).contiguous()`, `view(b, -1, h, w)`) of a value a region converts back to
/// row-major for it becomes one `xalloc::channel_shuffle(x, g)` of the region's own value, the
/// exit conversion gone: the same elements, channels-last when x is (the runtime's op: ATen's
/// channel_shuffle, or the idiom's ops when gradients are wanted). Only where everything that
/// reads the result reads any layout (conversions, packed convolutions, sizes, chunks of
/// channels read so). The region decisions run it after applying a region that runs the
/// runtime's ops (the fast form). Returns how many.
std::int64_t shuffleChannelsInPlace(torch::jit::Graph& graph);

/// Each `xalloc::channel_shuffle(cat([a, b], 1), 2)` (ShuffleNetV2's unit end, after
/// shuffleChannelsInPlace) made one `xalloc::cat_shuffle(a, b)`, or, when its one reader is a
/// `chunk(2, 1)` unpacked into two halves (the next unit's start), one
/// `xalloc::cat_shuffle_chunk(a, b)` making both halves dense; a conversion only the
/// concatenation read goes too (the op reads a slice of channels where it is). The same
/// elements, bit for bit. Returns how many.
std::int64_t fuseCatShuffles(torch::jit::Graph& graph);

/// Each list of feature maps that only channel concatenations read (DenseNet's dense blocks:
/// built by prim::ListConstruct, grown by aten::append, read by aten::cat(list, 1)) made
/// channels-last: a part a fast-form region made goes in as it is (its exit conversion to
/// row-major dropped), any other part is converted once, so every concatenation of the list is
/// channels-last and the region reading it converts nothing. Only where whatever reads the
/// concatenations gives the same values from any layout (batch norm, relu, convolutions,
/// poolings, flatten, then a linear; conversions; sizes; other such lists). The region decisions
/// run it after the fast form's regions. Returns how many lists.
std::int64_t channelListsChannelsLast(torch::jit::Graph& graph);
/// True when `v` is a concatenation of such a list: in the fast form it comes channels-last, so
/// xprof times the fast form's channels-last candidates of a region it enters as it will come.
bool concatenatesChannelsLastList(const torch::jit::Value* v);

/// Each squeeze-and-excitation block whose two 1x1 convolutions are packed,
/// `x * expand(reduce(adaptive_avg_pool2d(x, [1, 1])))` (either operand order, the pooling and
/// the convolutions read by nothing else), made one xalloc::squeeze_excite(x, reduce, expand):
/// the channel means, both convolutions and the scaling in one call. The region decisions run it
/// after the fast form's regions. Returns how many.
std::int64_t fuseSqueezeExcite(torch::jit::Graph& graph);

/// Each `aten::contiguous(x, memory_format=torch.channels_last)` whose one reader is a packed
/// convolution's input removed: the convolution converts x itself, with the runtime's kernels
/// (faster than ATen's copy on a cold input, such as the model's NCHW input). The region
/// decisions run it after the fast form's regions. Returns how many.
std::int64_t packedConvsConvertEntries(torch::jit::Graph& graph);

/// Inserts `aten::contiguous(value)` right before `before` (lifted to the value's block so it
/// dominates later uses) and returns the converted value. The node borrows `source`'s range and
/// module scope, so a diff shows it beside the op it converts for.
torch::jit::Value* insertContiguous(torch::jit::Value* value, torch::jit::Node* before,
                                    torch::jit::Node* source);

/// True when `n` is `aten::contiguous(x)` with the default (row-major) memory format.
bool isRowMajorContiguousCall(const torch::jit::Node* n);
/// True when `n` is `aten::contiguous(x, memory_format=torch.channels_last)`, the format a
/// constant.
bool isChannelsLastContiguousCall(const torch::jit::Node* n);
/// The same for `aten::contiguous(x, memory_format=torch.channels_last_3d)`.
bool isChannelsLast3dContiguousCall(const torch::jit::Node* n);

} // namespace xalloc::tspass
