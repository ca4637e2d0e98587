// xsched's per-site rules, clang-tidy style: each rule is a small check in a file of its own that
// reads the facts of one site (measured and predicted once, by site_facts.cpp) and either gives a
// verdict or passes. A verdict is data: an action, a blocker and named values; the registry adds
// the rule's id and wording.cpp says it in words. They are registered in priority order in one
// place, rules.def; the first verdict wins. Adding a rule is one file, one line in rules.def
// (CMake builds the files it names), its sentence in wording.cpp and its test
// (tests/unit/test_rules.cpp checks verdicts, which rule gave them and the blocker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"

#include "../candidates.h"

namespace xalloc::scheduler::rules {

/// What a verdict's decision carries besides its action and reason.
enum class Carries {
  Nothing,    // no consumers and no numbers: the site was ruled out before anything was weighed
  Candidates, // every consumer a conversion could serve, and the numbers
  Gaining,    // the consumers the conversion serves, and the numbers
  Call,       // remove: the call's own time, nothing measured in the consumers
  Measured,   // remove: the consumers' time without the conversion, and the numbers
  Fused,      // remove by fusing into the producer (Kept): what the fusion saves
};

/// A rule's verdict, as data (LLVM's remarks: a pass, an id, named values): the action, what
/// blocked the edit, and the numbers and words it weighed. The registry adds the rule's id;
/// wording.cpp says it in words.
struct Verdict {
  Verdict(formats::Action a, formats::Blocker b, formats::NamedValues v = {}, bool vetoes = true,
          Carries what = Carries::Nothing, bool async = true)
      : action(a), blocker(b), values(std::move(v)), veto(vetoes), carries(what),
        async_allowed(async) {}
  formats::Action action = formats::Action::None;
  formats::Blocker blocker = formats::Blocker::None;
  formats::NamedValues values;
  /// The edit is ruled out whatever it gains (other bits or layouts, a write, nothing to judge
  /// by); otherwise a `none` only says the gain is too small to be sure of.
  bool veto = true;
  Carries carries = Carries::Nothing;
  /// Whether the conversion may still be weighed hidden in an idle window.
  bool async_allowed = true;
};

/// The rules' view of the profile: what kind of op a consumer is.
struct OpKinds {
  const formats::Profile& profile;
  /// aten::size and the like: they read sizes and flags, which no layout changes.
  bool readsOnlySizes(std::int64_t op_id) const;
  /// View ops only compute new sizes and strides: a contiguous input cannot make them faster.
  bool allViews(const std::vector<std::int64_t>& ops) const;
  /// An aten::reshape among them: one that gains from a contiguous input copied it.
  bool anyReshape(const std::vector<std::int64_t>& ops) const;
  std::string kind(std::int64_t op_id) const;
};

/// A non-contiguous value made by an op that is not a conversion: make it contiguous?
struct SyncSite {
  SyncSite(const formats::Record& r, const formats::Op& p, const formats::Profile& profile)
      : record(r), producer(p), ops{profile} {}
  const formats::Record& record;
  const formats::Op& producer;
  OpKinds ops;
  bool program = false; // a C++ program's profile: one edit converts the value for every use
  bool exact = false;   // --exact: only bit-identical outputs count as the same
  // Its consumers by what a contiguous input does to them.
  std::vector<std::int64_t> candidates; // measured, same output bits and layout
  std::vector<std::int64_t> gaining;    // those the conversion serves (a program: candidates)
  /// Of `candidates`, those whose output changes layout, weighed by what runs after them
  /// (ConsumerTiming::downstream).
  std::vector<std::int64_t> through;
  std::size_t converted = 0; // an existing aten::contiguous (a site of its own)
  std::size_t neutral = 0;   // reads only sizes
  std::size_t unmeasured = 0, differing = 0, relayouting = 0;
  double saving = 0;            // ms per run of the model, summed over `gaining`
  double reads = 0;             // times `gaining` read the value in one run
  bool constant = false;        // computed from constants, read only by gaining consumers: cost 0
  bool priced = false;          // the cost model covers the layout
  double cost = 0;              // ms per run of the model, fresh output included where paid
  double allocation = 0;        // of which the fresh output
  double runs = 1;              // conversions per run of the model (the producer's, by bytes)
  double margin = 0;            // the gain the decision must beat
  bool margin_is_floor = false; // the margin is the smallest gain worth an edit, not the noise
  std::string cost_model;       // "classic", "stride", "constant", ...
  double producer_runs = 1;     // the producer's runs per run of the model (or the program's)
  /// The producer writes the value row-major itself (ProducerFusion, measured faster than a
  /// separate conversion by more than its noise, within the tolerance): the input its buffer is
  /// made like, and what that saves per run (already taken off `cost`).
  std::optional<std::int64_t> fused_template;
  double fusion_saving = 0;

  std::size_t consumers() const { return record.consumers.size(); }
  /// The conversion gains more than its margin.
  bool worth() const { return !gaining.empty() && saving - cost > margin; }
  /// No consumer a conversion could serve, other than conversions and size readers: the edit
  /// is ruled out (a veto for a program's other calls of the expression).
  bool nothingToServe() const { return candidates.empty() && converted + neutral < consumers(); }
};

/// An existing aten::contiguous: remove it?
struct RemoveSite {
  RemoveSite(const formats::Record& r, const formats::Op& conv, const formats::Record* in,
             const formats::Profile& profile)
      : record(r), conversion(conv), input(in), ops{profile} {}
  const formats::Record& record; // the conversion's output
  const formats::Op& conversion;
  const formats::Record* input; // its input; nullptr when not recorded
  OpKinds ops;
  /// The first consumer that needs a contiguous input regardless of shapes (when the input is
  /// already contiguous here), as "aten::view"; "" when none.
  std::string needs_contiguous_anyway;
  /// The first consumer that keeps a removal from being weighed at all, and why
  /// (NeedsContiguous, Unmeasured, OutputBits, OutputLayout; None when none does).
  formats::Blocker blocker = formats::Blocker::None;
  std::string blocker_op; // its kind
  double extra = 0;       // how much longer the consumers take without the conversion
  bool exact = false;     // --exact: only bit-identical outputs count as the same
  double margin = 0;
  bool margin_is_floor = false;
};

/// A conversion the remove rules kept: its facts, and what its producer fused with it measured
/// (ProducerFusion of its input: the producer writing row-major itself), measured by
/// site_facts.cpp.
struct Kept {
  const RemoveSite& site;
  const formats::Decision& kept; // the remove rules' verdict, action none
  /// The input's producer can write row-major itself, and nothing else reads the input or
  /// writes either value: a fusion is possible at all.
  bool fusible = false;
  bool within_tolerance = false; // the fused producer's outputs, against the tolerance
  double gain = 0;               // ms per run the fusion saves (the producer's runs)
  double margin = 0;             // what it must beat
};

/// Two edits made, `through` weighed through the ops that read `reached`'s value: each was
/// measured with the other not made, so together they would count those ops twice.
struct Overlap {
  const Candidate& through;
  const Candidate& reached;
};
struct OverlapVerdict {
  bool drop_through;           // which of the two goes (with the members of its edit group)
  formats::NamedValues values; // kept_value, kept_net_ms, net_ms (blocker: plan)
};

/// A verdict that edits, on a site no edit can reach: nothing to keep it, or the verdict that
/// leaves it alone.
struct Edited {
  const formats::Profile& profile;
  const formats::Op& producer;
  const formats::Decision& decision;
  bool can_async;
};

using SyncRule = std::optional<Verdict> (*)(const SyncSite&);
using RemoveRule = std::optional<Verdict> (*)(const RemoveSite&);
using KeepRule = std::optional<Verdict> (*)(const Kept&);
using EditRule = std::optional<Verdict> (*)(const Edited&);
using OverlapRule = std::optional<OverlapVerdict> (*)(const Overlap&);

template <class F> struct Registered {
  const char* name;
  F check;
};

/// The rules in priority order (rules.def).
const std::vector<Registered<SyncRule>>& syncRules();
const std::vector<Registered<RemoveRule>>& removeRules();
const std::vector<Registered<KeepRule>>& keepRules();
const std::vector<Registered<EditRule>>& editRules();
const std::vector<Registered<OverlapRule>>& overlapRules();

/// What a conversion of the site was weighed by: saving_ms, cost_ms, allocation_ms, margin_ms,
/// margin ("noise" or "floor"), cost_model, consumers (those it serves), through, and how often
/// it runs (program: made, read; a model: runs, runs_by_bytes).
formats::NamedValues weighed(const SyncSite& s);

/// A site a conversion would not pay for: left alone, with the consumers it could serve kept for
/// review; a veto when there are none (SyncSite::nothingToServe).
inline Verdict notWorth(const SyncSite& s, formats::Blocker why, formats::NamedValues more = {}) {
  formats::NamedValues v = weighed(s);
  v.insert(v.end(), more.begin(), more.end());
  return {formats::Action::None, why, std::move(v), s.nothingToServe(), Carries::Candidates, true};
}

/// A site ruled out before anything is weighed (a write, no price, a consumer that refuses):
/// nothing carried, a veto.
inline Verdict blocked(formats::Blocker why, formats::NamedValues v = {}) {
  return {formats::Action::None, why, std::move(v), true, Carries::Nothing, true};
}

} // namespace xalloc::scheduler::rules
