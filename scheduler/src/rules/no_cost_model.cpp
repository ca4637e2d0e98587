// no-cost-model: a conversion no cost model can price is not weighed.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> noCostModel(const SyncSite& s) {
  if (s.priced)
    return std::nullopt;
  return blocked("no cost model covers " + s.record.layout.dtype + " on " + s.record.layout.device);
}

} // namespace xalloc::scheduler::rules
