// The per-site decisions (decide_sites.cpp): every site of a profile as the rules decide it
// alone, with what it would gain and cost, before the solver weighs them together.
#pragma once

#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/scheduler/decide.h"

#include "candidates.h"

namespace xalloc::scheduler {

std::vector<Candidate> decideSites(const formats::Profile& p, const formats::Cost& cost,
                                   const SchedOptions& o);

} // namespace xalloc::scheduler
