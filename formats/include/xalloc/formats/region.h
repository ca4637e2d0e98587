// Layout regions: ops that accept and keep a layout (convolutions, pooling, norms, activations,
// elementwise ops, residual adds), connected through the 4-D (5-D) tensors they pass each other.
// A region's layout is chosen as a whole; conversions sit at its entries and exits only. The
// profile lists each region with every candidate layout measured on the real inputs (boundary
// conversions counted); a schedule's region decision names the region and the layout chosen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "xalloc/formats/enums.h"
#include "xalloc/formats/layout_traits.h"
#include "xalloc/formats/types.h"

namespace xalloc::formats {

/// One way of running a region, and what it measured.
struct RegionCandidate {
  /// The layout, a row of layout_traits.cpp (never null): the documents name it by its name.
  /// By default the region as it is, row-major.
  const LayoutTraits* layout = &regionLayoutTraits().front();
  bool measured = false;
  double time_ms = 0; // median of the region's runs in isolation, boundary conversions included
  double spread_ms = 0;
  /// Median and IQR of paired differences (this candidate - the region as it is), runs taken
  /// back to back: negative when this candidate is faster.
  std::optional<double> delta_ms;
  std::optional<double> delta_spread_ms;
  /// Of the paired rounds, how many there were and in how many this candidate was faster than
  /// the region as it is: a sign test that outliers of either cannot sway (at two threads on a
  /// shared machine, a quarter of ATen's rounds may take ten times the median).
  std::optional<std::int64_t> rounds;
  std::optional<std::int64_t> faster_rounds;
  bool identical_output = true;
  /// max |this - as is| over max |as is|, per exit, the largest; absent when bit-identical or
  /// unbounded (a NaN that was not there).
  std::optional<double> output_error;
  std::string note; // why it was not measured, when it was not

  const LayoutTraits& traits() const { return *layout; }
  /// The memory format of its activations.
  LayoutTarget target() const { return layout->target; }
  /// Weights packed once for oneDNN, the activation after each convolution or linear fused into
  /// it (xalloc::conv2d_packed with channels_last activations, xalloc::linear_packed with
  /// contiguous ones): the runtime's ops, so the fast form only.
  bool packed() const { return layout->packed; }
  /// Needs libxalloc_runtime.so loaded (packed convolutions, blocked constants).
  bool needsRuntime() const { return layout->needs_runtime; }
  /// The layout's name: "channels_last", "channels_last+packed", "blocked", ...
  std::string name() const { return layout->name; }
  /// Whether it is the region as it is (the first row of the table).
  bool asIs() const { return layout == &regionLayoutTraits().front(); }
};

/// The candidate of the layout `traits`, not yet measured.
RegionCandidate candidateOf(const LayoutTraits& traits);

/// A region as both documents name it: its ops by source anchor, in graph order, in the frozen
/// model (torch.jit.freeze; xrewrite --freeze), where weights are constants that can be re-laid.
struct RegionRef {
  std::int64_t id = 0;
  std::vector<Anchor> nodes;
  std::int64_t convolutions = 0;
};

/// An exit of a region read by another region's ops (directly, or through ops that only hand
/// its elements on: parts of channels, a channel shuffle): where both run in one channels-last
/// layout, neither the exit's conversion nor the entry's is written.
struct RegionFeed {
  std::int64_t exit = 0;   // index into the region's exits
  std::int64_t region = 0; // the id of the region reading it
};

struct Region {
  RegionRef ref;
  std::vector<Layout> entries; // the tensors it reads from outside, as they are
  std::vector<Layout> exits;   // the tensors read outside it (or returned)
  std::vector<RegionFeed> feeds;
  /// [0] is the region as it is (contiguous); the others are the layouts tried.
  std::vector<RegionCandidate> candidates;
  /// How far the exits of the region as it is move when its float inputs move by one unit in the
  /// last place (the error measure of a candidate's output_error): float32 rounding's own
  /// effect, against which a layout's change is judged beside the tolerance. Absent when not
  /// measured (or not finite).
  std::optional<double> rounding_error;
  std::string note; // why its candidates were not measured, when they were not
};

/// The candidate of the layout named `name` ("channels_last+packed"); nullopt when the table has
/// none of that name.
std::optional<RegionCandidate> parseCandidateName(const std::string& name);
/// Reads a region layout as a document names it: by its name in `name_key` (profile version 2,
/// schedule version 3), else, from older documents, by the pair `target` + `packed`. Fails at
/// the field when the table has no such layout, listing the names it has.
const LayoutTraits& readRegionLayout(const JsonReader& r, const char* name_key);

nlohmann::json toJson(const RegionCandidate& c);
nlohmann::json toJson(const RegionRef& r);
nlohmann::json toJson(const Region& r);
RegionCandidate readRegionCandidate(const JsonReader& r);
RegionRef readRegionRef(const JsonReader& r);
Region readRegion(const JsonReader& r);

} // namespace xalloc::formats
