// views: view ops compute new sizes and strides and read no data; a contiguous input cannot
// make them faster.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> views(const SyncSite& s) {
  if (s.worth() || s.candidates.empty() || !s.ops.allViews(s.candidates))
    return std::nullopt;
  return notWorth(s, "its consumers are views, which read no data");
}

} // namespace xalloc::scheduler::rules
