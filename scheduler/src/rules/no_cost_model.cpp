// no-cost-model: a conversion no cost model can price is not weighed.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> noCostModel(const SyncSite& s) {
  if (s.priced)
    return std::nullopt;
  return blocked(formats::Blocker::NoCostModel,
                 {{"dtype", s.record.layout.dtype}, {"device", s.record.layout.device}});
}

} // namespace xalloc::scheduler::rules
