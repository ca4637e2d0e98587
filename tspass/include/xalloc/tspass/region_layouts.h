// The region layouts as objects, one file each (tspass/src/layouts/<name>.cpp, listed
// in layouts.def): what it fits and what it needs (its formats::LayoutTraits row, of the same
// name), how it is applied to a region, and how to tell it is applied already. The profiler
// takes its candidates from this table and the rewriter applies them through it; neither knows
// one layout from another.
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/layout_traits.h"
#include "xalloc/formats/region.h"
#include "xalloc/tspass/regions.h"

namespace xalloc::tspass {

class RegionLayout {
public:
  explicit RegionLayout(const char* name);
  virtual ~RegionLayout() = default;
  RegionLayout(const RegionLayout&) = delete;
  RegionLayout& operator=(const RegionLayout&) = delete;

  const formats::LayoutTraits& traits() const { return traits_; }
  /// Whether this process can run it: the packed layouts need a runtime built with oneDNN.
  bool available() const;
  /// Rewrites region `r` of `graph` in place to run in this layout (r.nodes updated); an edit
  /// with applied = false and a message when it cannot. The caller has checked fits/available.
  virtual RegionEdit apply(torch::jit::Graph& graph, LayoutRegion& r) const = 0;
  /// True when `r`, a region found again by its ops, already reads its entries in this layout.
  virtual bool readsEntriesIn(const LayoutRegion& r) const;
  /// True when `now`, the op at the place of a region op that was a `was`, shows this layout
  /// applied (a packed or blocked op, a re-laid weight).
  virtual bool appliedAt(const torch::jit::Node* now, const std::string& was) const;

private:
  const formats::LayoutTraits& traits_;
};

/// Every region layout, in formats::regionLayoutTraits() order ([0]: row-major, as it is).
const std::vector<const RegionLayout*>& regionLayouts();
/// The layout a candidate names.
const RegionLayout& regionLayout(const formats::RegionCandidate& c);
/// The candidates for a region of rank `rank` this process can run, the region as it is first.
std::vector<formats::RegionCandidate> regionCandidates(int rank);

} // namespace xalloc::tspass
