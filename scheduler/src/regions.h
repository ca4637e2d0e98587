// Region decisions (regions.cpp): each layout region of the profile run in its fastest measured
// layout, or left as it is with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/scheduler/decide.h"

namespace xalloc::scheduler {

struct RegionVerdict {
  formats::Decision decision; // with its `region`; sync with a target, or none
  double gain = 0;            // measured, ms per run of the model
};

/// One verdict per region of the profile. `floor_ms`: the smallest gain worth an edit.
/// `cost` prices the conversions at borders between regions that run in one channels-last
/// layout (a region's neighbours).
std::vector<RegionVerdict> decideRegions(const formats::Profile& p, const formats::Cost& cost,
                                         const SchedOptions& o, double floor_ms);

/// The ops of the regions chosen to run in another layout, indexed once by their site (file,
/// function, expression, ordinal; the op kind aside: a linear the profile saw exposed, its k-th
/// t, matmul and add, is the k-th aten::linear of the same source in the frozen graph).
class ChosenRegions {
public:
  explicit ChosenRegions(const std::vector<RegionVerdict>& regions);
  /// The region a value decision's producer or one of its consumers belongs to (the region's
  /// rewrite decides those ops); nullopt when none.
  std::optional<std::int64_t> regionOf(const formats::Decision& value_decision,
                                       const formats::Profile& p) const;

private:
  std::map<std::tuple<std::string, std::string, std::string, std::int64_t>, std::int64_t> by_site_;
};

} // namespace xalloc::scheduler
