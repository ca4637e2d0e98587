// The per-site decisions: each site's facts (site_facts.h) handed to the rules of rules.def in
// priority order, the first verdict taken, then the edit and keep rules; what each site would
// gain and cost alone, for the solver.
#include "decide_sites.h"

#include "xalloc/error.h"

#include "rules/rule.h"
#include "site_facts.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;
using formats::Record;

namespace {

class Decider {
public:
  Decider(const Profile& p, const formats::Cost& c, const SchedOptions& o)
      : p_(p), o_(o), facts_(p, c, o) {}

  std::vector<Candidate> decideAll() {
    std::vector<Candidate> out;
    for (const Record& r : p_.records) {
      // A loop body's own parameter (origin "loop-carried") is produced by no op of its own:
      // no edit can convert it there.
      if (!r.producer_op || r.consumers.empty() || r.origin == formats::Origin::LoopCarried)
        continue;
      const formats::Op* producer = p_.findOp(*r.producer_op);
      XALLOC_EXPECTS(producer != nullptr, "profile was validated");
      if (producer->kind == "aten::contiguous") {
        out.emplace_back();
        out.back().edit = Action::Remove;
        decideRemove(r, *producer, out.back());
      } else if (!r.contiguous) {
        out.emplace_back();
        decideSync(r, *producer, out.back());
      } else {
        continue;
      }
      checkEdit(out.back(), *producer);
    }
    return out;
  }

private:
  // A verdict that edits, checked by the edit rules (a site no source edit can reach).
  void checkEdit(Candidate& c, const formats::Op& producer) const {
    for (const auto& rule : rules::editRules())
      if (auto reason = rule.check({p_, producer, c.decision, c.can_async})) {
        c.decision.reason = std::move(*reason);
        c.decision.action = Action::None;
        c.can_async = false;
        c.rule = rule.name;
        return;
      }
  }

  Decision base(const Record& r, const formats::Op& producer) const {
    Decision d;
    d.value_id = r.id;
    d.value_name = r.name;
    d.producer = producer.id;
    d.output_index = r.output_index;
    d.anchor = producer.anchor;
    d.layout = r.layout;
    d.action = Action::None;
    return d;
  }

  void decideSync(const Record& r, const formats::Op& producer, Candidate& c) const {
    const rules::SyncSite s = facts_.syncFacts(r, producer);
    for (const auto& rule : rules::syncRules()) {
      auto v = rule.check(s);
      if (!v)
        continue;
      Decision d = base(r, producer);
      d.action = v->action;
      d.reason = std::move(v->reason);
      c.rule = rule.name;
      c.veto = v->veto;
      if (v->carries != rules::Carries::Nothing) {
        d.consumers = v->carries == rules::Carries::Gaining ? s.gaining : s.candidates;
        d.predicted_cost_ms = s.cost;
        d.predicted_saving_ms = s.saving;
        c.saving = s.saving;
        c.cost = s.cost;
        c.conversions = s.runs;
        c.margin = s.margin;
        c.through = s.through;
        // Hidden in an idle window, the conversion costs the critical path only the hand-off.
        // Idle windows are moments of one run; a value made in a loop is made at many.
        c.can_async = v->async_allowed && !s.constant && !r.in_loop && !s.gaining.empty() &&
                      !s.fused_template && s.saving - o_.async_overhead_ms * s.runs > s.margin;
        if (d.action == Action::Sync && s.fused_template &&
            d.consumers.size() == r.consumers.size()) {
          d.fused_template_input = s.fused_template;
          d.reason += "; fused into its producer (" + r.producer_fusion->op + " writes it " +
                      "row-major itself, measured " + fmtMs(s.fusion_saving) +
                      " faster than converting after it)";
        }
      }
      c.decision = std::move(d);
      return;
    }
    XALLOC_EXPECTS(false, "the last sync rule decides every site");
  }

  void decideRemove(const Record& r, const formats::Op& conv, Candidate& c) const {
    const rules::RemoveSite s = facts_.removeFacts(r, conv);
    for (const auto& rule : rules::removeRules()) {
      auto v = rule.check(s);
      if (!v)
        continue;
      Decision d = base(r, conv);
      for (const auto& consumer : r.consumers)
        d.consumers.push_back(consumer.op_id);
      d.predicted_cost_ms = conv.duration_ms;
      if (s.input && s.input->producer_op)
        d.input_anchor = p_.findOp(*s.input->producer_op)->anchor;
      d.action = v->action;
      d.reason = std::move(v->reason);
      c.rule = rule.name;
      c.veto = v->veto;
      if (v->carries == rules::Carries::Call) {
        c.saving = conv.duration_ms;
      } else if (v->carries == rules::Carries::Measured) {
        d.predicted_saving_ms = s.extra;
        c.saving = conv.duration_ms;
        c.cost = s.extra;
        c.margin = s.margin;
      }
      c.decision = std::move(d);
      if (c.decision.action != Action::Remove)
        keepRules(s, c);
      return;
    }
    XALLOC_EXPECTS(false, "the last remove rule decides every site");
  }

  // A conversion the remove rules keep: the keep rules (fuse-existing) may still take it away.
  void keepRules(const rules::RemoveSite& s, Candidate& c) const {
    const rules::Kept k = facts_.keptFacts(s, c.decision);
    for (const auto& rule : rules::keepRules()) {
      auto v = rule.check(k);
      if (!v)
        continue;
      Decision& d = c.decision;
      d.action = v->action;
      d.fused_template_input = s.input->producer_fusion->template_input;
      // As a removal's: the time the conversion took goes (here, what the fusion saves), and
      // the consumers take no longer.
      d.predicted_cost_ms = k.gain;
      d.predicted_saving_ms = 0;
      d.reason = std::move(v->reason);
      c.rule = rule.name;
      c.veto = v->veto;
      c.saving = k.gain;
      c.cost = 0;
      c.margin = k.margin;
      return;
    }
  }

  const Profile& p_;
  SchedOptions o_;
  SiteFacts facts_;
};

} // namespace

std::vector<Candidate> decideSites(const Profile& p, const formats::Cost& cost,
                                   const SchedOptions& o) {
  return Decider(p, cost, o).decideAll();
}

std::vector<SiteVerdict> siteVerdicts(const Profile& p, const formats::Cost& cost,
                                      const SchedOptions& o) {
  std::vector<SiteVerdict> out;
  for (const Candidate& c : decideSites(p, cost, o))
    out.push_back({c.decision.value_id, c.decision.action, c.veto, c.rule});
  return out;
}

} // namespace xalloc::scheduler
