// The per-site decisions: each site's facts (site_facts.h) handed to the rules of rules.def in
// priority order, the first verdict taken, then the edit and keep rules; what each site would
// gain and cost alone, for the solver.
#include "decide_sites.h"

#include "xalloc/error.h"

#include "rules/rule.h"
#include "site_facts.h"
#include "wording.h"

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
      if (auto v = rule.check({p_, producer, c.decision, c.can_async})) {
        Decision& d = c.decision;
        d.action = v->action;
        d.rule = rule.name;
        d.blocker = v->blocker;
        d.values = std::move(v->values);
        d.reason = wording::reason(siteOf(c), d);
        c.can_async = false;
        c.rule = rule.name;
        return;
      }
  }

  // The verdict of `rule` as the decision's data, and its words.
  static void take(const char* rule, rules::Verdict& v, Decision& d, Candidate& c) {
    d.action = v.action;
    d.rule = rule;
    d.blocker = v.blocker;
    d.values = std::move(v.values);
    c.rule = rule;
    c.veto = v.veto;
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
      take(rule.name, *v, d, c);
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
          d.values.push_back({"fused_op", r.producer_fusion->op});
          d.values.push_back({"fusion_saving_ms", s.fusion_saving});
        }
      }
      d.reason = wording::reason(wording::Site::Value, d);
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
      take(rule.name, *v, d, c);
      d.reason = wording::reason(wording::Site::Conversion, d);
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
      take(rule.name, *v, d, c);
      d.reason = wording::reason(wording::Site::Conversion, d);
      d.fused_template_input = s.input->producer_fusion->template_input;
      // As a removal's: the time the conversion took goes (here, what the fusion saves), and
      // the consumers take no longer.
      d.predicted_cost_ms = k.gain;
      d.predicted_saving_ms = 0;
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
    out.push_back({c.decision.value_id, c.decision.action, c.veto, c.rule, c.decision.blocker,
                   c.decision.values, c.decision.reason});
  return out;
}

} // namespace xalloc::scheduler
