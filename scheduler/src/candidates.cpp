// Candidates and the sites one source edit decides together (candidates.h).
#include "candidates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;

std::string fmtMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f ms", ms);
  return buf;
}

std::vector<std::vector<std::size_t>> editGroups(const Profile& p,
                                                 const std::vector<Candidate>& cands) {
  const bool program = p.model.format == formats::ModelFormat::LibtorchProgram;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    const Decision& d = cands[i].decision;
    if (program && !d.anchor.file.empty()) {
      auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        return formats::sameExpression(cands[g.front()].decision, d);
      });
      if (same != groups.end()) {
        same->push_back(i);
        continue;
      }
    }
    groups.push_back({i});
  }
  return groups;
}

void reconcile(std::vector<Candidate>& cands, const std::vector<std::size_t>& group) {
  if (group.size() < 2)
    return;
  const Candidate* veto = nullptr;
  const Candidate* idle = nullptr; // a member none alone
  double net = 0, var = 0;
  for (std::size_t i : group) {
    Candidate& c = cands[i];
    c.can_async = false;
    if (c.veto && !veto)
      veto = &c;
    if (c.decision.action == Action::None && !idle)
      idle = &c;
    net += c.saving - c.cost;
    var += c.margin * c.margin;
  }
  const double margin = std::sqrt(var);
  const std::string calls =
      "one edit changes all " + std::to_string(group.size()) + " calls of this expression";
  auto on = [](const Candidate& c) {
    return "the call on " + c.decision.layout.sizesText() + ": " + c.decision.reason;
  };
  std::string reason;
  if (veto)
    reason = calls + ", and it is ruled out for " + on(*veto);
  else if (net <= margin && idle)
    reason = calls + ", and together they gain " + fmtMs(net) + ", not more than the margin " +
             fmtMs(margin) + " (" + on(*idle) + ")";
  if (!reason.empty()) {
    for (std::size_t i : group)
      if (cands[i].decision.action != Action::None) {
        cands[i].decision.action = Action::None;
        cands[i].decision.reason = reason;
      }
    return;
  }
  if (!idle || net > margin)
    for (std::size_t i : group) {
      Decision& d = cands[i].decision;
      d.action = cands[i].edit;
      d.reason +=
          "; " + calls + ": together they gain " + fmtMs(net) + " (margin " + fmtMs(margin) + ")";
    }
}

} // namespace xalloc::scheduler
