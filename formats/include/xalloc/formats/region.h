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
  LayoutTarget target = LayoutTarget::Contiguous;
  /// Weights packed once for oneDNN, the activation after each convolution or linear fused into
  /// it (xalloc::conv2d_packed with channels_last activations, xalloc::linear_packed with
  /// contiguous ones): the runtime's ops, so the fast form only.
  bool packed = false;
  bool measured = false;
  double time_ms = 0; // median of the region's runs in isolation, boundary conversions included
  double spread_ms = 0;
  /// Median and IQR of paired differences (this candidate - the region as it is), runs taken
  /// back to back: negative when this candidate is faster.
  std::optional<double> delta_ms;
  std::optional<double> delta_spread_ms;
  bool identical_output = true;
  /// max |this - as is| over max |as is|, per exit, the largest; absent when bit-identical or
  /// unbounded (a NaN that was not there).
  std::optional<double> output_error;
  std::string note; // why it was not measured, when it was not

  /// Its row of layout_traits.cpp (a candidate read or parsed always has one).
  const LayoutTraits& traits() const;
  /// Needs libxalloc_runtime.so loaded (packed convolutions, blocked constants).
  bool needsRuntime() const;
  /// The layout's name: "channels_last", "channels_last+packed", "blocked", ...
  std::string name() const;
};

/// A region as both documents name it: its ops by source anchor, in graph order, in the frozen
/// model (torch.jit.freeze; xrewrite --freeze), where weights are constants that can be re-laid.
struct RegionRef {
  std::int64_t id = 0;
  std::vector<Anchor> nodes;
  std::int64_t convolutions = 0;
};

struct Region {
  RegionRef ref;
  std::vector<Layout> entries; // the tensors it reads from outside, as they are
  std::vector<Layout> exits;   // the tensors read outside it (or returned)
  /// [0] is the region as it is (contiguous); the others are the layouts tried.
  std::vector<RegionCandidate> candidates;
  std::string note; // why its candidates were not measured, when they were not
};

/// Parses "channels_last+packed" and the names of LayoutTarget; nullopt otherwise.
std::optional<RegionCandidate> parseCandidateName(const std::string& name);

nlohmann::json toJson(const RegionCandidate& c);
nlohmann::json toJson(const RegionRef& r);
nlohmann::json toJson(const Region& r);
RegionCandidate readRegionCandidate(const JsonReader& r);
RegionRef readRegionRef(const JsonReader& r);
Region readRegion(const JsonReader& r);

} // namespace xalloc::formats
