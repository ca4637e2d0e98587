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
                        "overlaps the conversion of value " +
                            std::to_string(winner.decision.value_id) + " (" + fmtMs(net(winner)) +
                            " net), which was weighed through the ops that read this one; this "
                            "gains less (" +
                            fmtMs(net(loser)) + " net)"};
}

} // namespace xalloc::scheduler::rules
