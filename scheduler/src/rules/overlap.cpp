// overlap: of two edits made where one was weighed through the ops that read the other's value,
// the one that gains less (net of its cost) goes; the other's measurement stands.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<OverlapVerdict> overlap(const Overlap& o) {
  auto net = [](const Candidate& c) {
    return c.saving - c.cost;
  };
  const bool drop_through = net(o.reached) > net(o.through);
  const Candidate& winner = drop_through ? o.reached : o.through;
  const Candidate& loser = drop_through ? o.through : o.reached;
  return OverlapVerdict{drop_through,
                        {{"kept_value", static_cast<double>(winner.decision.value_id)},
                         {"kept_net_ms", net(winner)},
                         {"net_ms", net(loser)}}};
}

} // namespace xalloc::scheduler::rules
