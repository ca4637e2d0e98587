// The rules' registry: rules.def, in priority order, turned into one table per kind.
#include "rule.h"

#include <set>

#include "xalloc/formats/op_facts.h"

namespace xalloc::scheduler::rules {

#define SYNC_RULE(name, check) std::optional<Verdict> check(const SyncSite&);
#define REMOVE_RULE(name, check) std::optional<Verdict> check(const RemoveSite&);
#define KEEP_RULE(name, check) std::optional<Verdict> check(const Kept&);
#define EDIT_RULE(name, check) std::optional<Verdict> check(const Edited&);
#define OVERLAP_RULE(name, check) std::optional<OverlapVerdict> check(const Overlap&);
#include "rules.def"
#undef SYNC_RULE
#undef REMOVE_RULE
#undef KEEP_RULE
#undef EDIT_RULE
#undef OVERLAP_RULE

// Each table is rules.def read with its own kind's lines taken and every other kind's skipped.
#define XALLOC_SKIP(name, check)
#define XALLOC_TAKE(name, check) {name, check},
#define SYNC_RULE XALLOC_SKIP
#define REMOVE_RULE XALLOC_SKIP
#define KEEP_RULE XALLOC_SKIP
#define EDIT_RULE XALLOC_SKIP
#define OVERLAP_RULE XALLOC_SKIP

const std::vector<Registered<SyncRule>>& syncRules() {
#undef SYNC_RULE
#define SYNC_RULE XALLOC_TAKE
  static const std::vector<Registered<SyncRule>> rules = {
#include "rules.def"
  };
#undef SYNC_RULE
#define SYNC_RULE XALLOC_SKIP
  return rules;
}

const std::vector<Registered<RemoveRule>>& removeRules() {
#undef REMOVE_RULE
#define REMOVE_RULE XALLOC_TAKE
  static const std::vector<Registered<RemoveRule>> rules = {
#include "rules.def"
  };
#undef REMOVE_RULE
#define REMOVE_RULE XALLOC_SKIP
  return rules;
}

const std::vector<Registered<KeepRule>>& keepRules() {
#undef KEEP_RULE
#define KEEP_RULE XALLOC_TAKE
  static const std::vector<Registered<KeepRule>> rules = {
#include "rules.def"
  };
#undef KEEP_RULE
#define KEEP_RULE XALLOC_SKIP
  return rules;
}

const std::vector<Registered<EditRule>>& editRules() {
#undef EDIT_RULE
#define EDIT_RULE XALLOC_TAKE
  static const std::vector<Registered<EditRule>> rules = {
#include "rules.def"
  };
#undef EDIT_RULE
#define EDIT_RULE XALLOC_SKIP
  return rules;
}

const std::vector<Registered<OverlapRule>>& overlapRules() {
#undef OVERLAP_RULE
#define OVERLAP_RULE XALLOC_TAKE
  static const std::vector<Registered<OverlapRule>> rules = {
#include "rules.def"
  };
  return rules;
}
#undef SYNC_RULE
#undef REMOVE_RULE
#undef KEEP_RULE
#undef EDIT_RULE
#undef OVERLAP_RULE
#undef XALLOC_SKIP
#undef XALLOC_TAKE

formats::NamedValues weighed(const SyncSite& s) {
  formats::NamedValues v{{"saving_ms", s.saving},
                         {"cost_ms", s.cost},
                         {"allocation_ms", s.allocation},
                         {"margin_ms", s.margin},
                         {"margin", s.margin_is_floor ? "floor" : "noise"},
                         {"cost_model", s.cost_model},
                         {"consumers", static_cast<double>(s.gaining.size())},
                         {"through", static_cast<double>(s.through.size())}};
  if (s.program) {
    v.push_back({"made", s.runs});
    v.push_back({"read", s.reads});
  } else {
    v.push_back({"runs", s.producer_runs});
    v.push_back({"runs_by_bytes", s.runs});
  }
  return v;
}

bool OpKinds::readsOnlySizes(std::int64_t op_id) const {
  const formats::Op* op = profile.findOp(op_id);
  return op && formats::readsOnlyLayoutFreeMetadata(op->kind);
}

bool OpKinds::allViews(const std::vector<std::int64_t>& ops) const {
  for (std::int64_t id : ops) {
    const formats::Op* op = profile.findOp(id);
    if (!op || !formats::isViewOp(op->kind))
      return false;
  }
  return true;
}

bool OpKinds::anyReshape(const std::vector<std::int64_t>& ops) const {
  for (std::int64_t id : ops)
    if (const formats::Op* op = profile.findOp(id); op && op->kind == "aten::reshape")
      return true;
  return false;
}

std::string OpKinds::kind(std::int64_t op_id) const {
  const formats::Op* op = profile.findOp(op_id);
  return op ? op->kind : "op " + std::to_string(op_id);
}

} // namespace xalloc::scheduler::rules
