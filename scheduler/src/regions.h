// Region decisions (regions.cpp): each layout region of the profile run in its fastest measured
// layout, or left as it is with the reason.
#pragma once

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
std::vector<RegionVerdict> decideRegions(const formats::Profile& p, const SchedOptions& o,
                                         double floor_ms);

/// True when a value decision's producer or consumers are ops of a region chosen to run in
/// another layout (the region's rewrite decides those ops); sets the region's id.
bool insideChosenRegion(const formats::Decision& value_decision, const formats::Profile& p,
                        const std::vector<RegionVerdict>& regions, std::int64_t* region_id);

/// "1.2e-06"
std::string fmtSci(double x);

} // namespace xalloc::scheduler
