// xsched's words. A decision is data: the rule that decided (its id), what blocked the edit
// (formats::Blocker) and the named numbers and words it weighed (formats::NamedValues). Every
// reason schedule.json and `xsched --explain` give is written here, from that data alone, as
// LLVM renders its remarks in one place; the decision code passes numbers and never formats
// them. Adding a rule adds its sentence to the table in wording.cpp.
#pragma once

#include <string>
#include <string_view>

#include "xalloc/formats/schedule.h"

namespace xalloc::scheduler::wording {

/// Whose rules a decision's rule id names: a value a conversion could make contiguous (the
/// sync rules), an existing aten::contiguous (the remove and keep rules), a layout region.
enum class Site { Value, Conversion, Region };

/// The decision's reason, from its rule, blocker and values (a reason of its own for rules
/// shared by every site: "solver", "memory-budget", "layout-region", "overlap").
std::string reason(Site site, const formats::Decision& d);

/// A decision one source edit made or ruled out with the other calls of its expression
/// (rule "one-edit", or its own rule and "calls" among its values): the group's numbers are
/// `d`'s values, and `member` the call whose verdict decided the group (a veto, or a call
/// that alone is not worth it); nullptr when the group's summed gain decided.
std::string groupReason(Site site, const formats::Decision& d, const formats::Decision* member);

/// "0.1234 ms"
std::string fmtMs(double ms);
/// "1.2e-06"
std::string fmtSci(double x);
/// "12%"
std::string pct(double fraction);

} // namespace xalloc::scheduler::wording
