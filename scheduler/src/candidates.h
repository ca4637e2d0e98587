// xsched's candidates: each site as the per-site rules decided it alone, and the sites one
// source edit decides together (a C++ program's expression reached from several call stacks).
#pragma once

#include <string>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"

#include "wording.h"

namespace xalloc::scheduler {

/// A site as the per-site rules see it: the decision they would take alone, and what an async
/// conversion of it would gain.
struct Candidate {
  formats::Decision decision;
  double saving = 0, cost = 0, margin = 0;
  /// How many conversions `cost` adds up (the producer's runs): an async one fits a window per
  /// conversion, and each pays the hand-off.
  double conversions = 1;
  bool can_async = false; // the saving beats the noise margin once the cost is hidden
  /// The edit is ruled out whatever it gains: it would change results or what runs after, or it
  /// cannot be judged. Otherwise a `none` only says the gain is too small to be sure of.
  bool veto = false;
  /// Consumers whose output changes layout with the conversion, weighed by what runs after them
  /// (SyncSite::through): the values they make are measured as they are now, so a conversion of
  /// one of those overlaps this one (resolveOverlaps).
  std::vector<std::int64_t> through;
  formats::Action edit = formats::Action::Sync; // the site's edit: sync, or remove a conversion
  const char* rule = "";                        // the rule that gave the verdict (rules/rules.def)
};

/// Whose rules decided the candidate: a value's sync rules, or a conversion's remove rules.
inline wording::Site siteOf(const Candidate& c) {
  return c.edit == formats::Action::Remove ? wording::Site::Conversion : wording::Site::Value;
}

/// The candidates one source edit decides together, as lists of indices into `cands`. In a
/// program's profile a site is an expression of the program's source, reached under one call
/// stack: a helper that several functions call (`dense(x, w, b)` reading `w.t()`), or a module
/// used in two places, is several sites with one anchor, and the edit that converts (or
/// removes) it changes every call. A TorchScript model's ops are graph nodes, each edited alone.
std::vector<std::vector<std::size_t>> editGroups(const formats::Profile& p,
                                                 const std::vector<Candidate>& cands);

/// Makes the members of one group take one action. A member whose conversion is ruled out
/// (other bits or layouts, a write, nothing measured) vetoes the edit for all. Otherwise the
/// calls are weighed together: the edit is made when their gains summed beat their margins
/// combined (independent noise adds in quadrature), so a helper's small call neither blocks a
/// large gain nor rides on it unpriced. A group is never async: each call would need its own
/// window and hand-off.
void reconcile(std::vector<Candidate>& cands, const std::vector<std::size_t>& group);

/// A conversion weighed through a consumer whose output changes layout with it, and a conversion
/// of that output (or of an output further down the ops it was followed through), were each
/// measured with the other not made: together they would count the same consumers twice. Of two
/// such edits that are made, the one that gains less (net of its cost) becomes `none`, with all
/// the members of its edit group.
void resolveOverlaps(const formats::Profile& p, std::vector<Candidate>& cands,
                     const std::vector<std::vector<std::size_t>>& groups);

} // namespace xalloc::scheduler
