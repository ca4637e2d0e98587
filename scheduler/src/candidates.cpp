// Candidates and the sites one source edit decides together (candidates.h).
#include "candidates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>

#include "rules/rule.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;

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

void reconcile(std::vector<Candidate>& cands, const std::vector<std::size_t>& members) {
  if (members.size() < 2)
    return;
  const Candidate* veto = nullptr;
  const Candidate* idle = nullptr; // a member none alone
  double net = 0, var = 0;
  for (std::size_t i : members) {
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
  // The group's numbers, on each member: what the summed gain and margin were.
  auto group = [&](Decision& d, bool vetoed) {
    formats::setValue(d.values, "calls", static_cast<double>(members.size()));
    formats::setValue(d.values, "group_net_ms", net);
    formats::setValue(d.values, "group_margin_ms", margin);
    formats::setValue(d.values, "vetoed", vetoed ? 1.0 : 0.0);
  };
  const Candidate* decider = veto ? veto : net <= margin ? idle : nullptr;
  if (decider) {
    const Decision member = decider->decision;
    for (std::size_t i : members) {
      Decision& d = cands[i].decision;
      if (d.action == Action::None)
        continue;
      d.action = Action::None;
      d.values = member.values;
      d.blocker = veto ? member.blocker : formats::Blocker::BelowMargin;
      group(d, veto != nullptr);
      formats::setValue(d.values, "member_value", static_cast<double>(member.value_id));
      d.rule = cands[i].rule = "one-edit";
      d.reason = wording::groupReason(siteOf(cands[i]), d, &member);
    }
    return;
  }
  if (!idle || net > margin)
    for (std::size_t i : members) {
      Decision& d = cands[i].decision;
      group(d, false);
      formats::setValue(d.values, "own_rule", std::string(cands[i].rule));
      if (d.action != cands[i].edit)
        d.rule = cands[i].rule = "one-edit";
      d.action = cands[i].edit;
      d.blocker = formats::Blocker::None;
      d.reason = wording::groupReason(siteOf(cands[i]), d, nullptr);
    }
}

void resolveOverlaps(const Profile& p, std::vector<Candidate>& cands,
                     const std::vector<std::vector<std::size_t>>& groups) {
  std::vector<std::size_t> group_of(cands.size(), 0);
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t i : groups[g])
      group_of[i] = g;
  // The values made by the ops a conversion was weighed through, and by the ops after them
  // that the measurement followed (those whose output changed layout again).
  auto reachedValues = [&](const Candidate& a) {
    std::set<std::int64_t> values;
    std::function<void(const formats::ConsumerTiming&)> walk = [&](const auto& c) {
      if (const formats::Op* op = p.findOp(c.op_id))
        values.insert(op->outputs.begin(), op->outputs.end());
      for (const auto& d : c.downstream)
        if (!d.same_output_layout)
          walk(d);
    };
    const formats::Record* r = p.findRecord(a.decision.value_id);
    if (r)
      for (const auto& c : r->consumers)
        if (std::count(a.through.begin(), a.through.end(), c.op_id))
          walk(c);
    return values;
  };
  // The overlap rules (rules.def) say which of the two goes; the loser's edit group goes with it.
  auto judge = [&](std::size_t a, std::size_t b) -> std::optional<std::size_t> {
    for (const auto& rule : rules::overlapRules())
      if (auto v = rule.check({cands[a], cands[b]})) {
        const std::size_t loser = v->drop_through ? a : b;
        for (std::size_t i : groups[group_of[loser]]) {
          Decision& d = cands[i].decision;
          if (d.action == formats::Action::None)
            continue;
          d.action = formats::Action::None;
          d.rule = cands[i].rule = rule.name;
          d.blocker = formats::Blocker::Plan;
          for (const auto& nv : v->values)
            formats::setValue(d.values, nv.name, nv.value);
          d.reason = wording::reason(siteOf(cands[i]), d);
          cands[i].can_async = false;
        }
        return loser;
      }
    return std::nullopt;
  };
  for (std::size_t a = 0; a < cands.size(); ++a) {
    if (cands[a].through.empty() || cands[a].decision.action == formats::Action::None)
      continue;
    const std::set<std::int64_t> reached = reachedValues(cands[a]);
    for (std::size_t b = 0; b < cands.size(); ++b) {
      if (b == a || cands[b].decision.action == formats::Action::None ||
          !reached.count(cands[b].decision.value_id))
        continue;
      if (judge(a, b) == a)
        break; // a is gone: it reaches nothing any more
    }
  }
}

} // namespace xalloc::scheduler
