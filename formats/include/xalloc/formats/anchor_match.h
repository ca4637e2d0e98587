// How an anchor is found again, without Clang or libtorch: the pieces both sides' matchers share
// (xrewrite --cpp through cppsource's findByText, the graph rewriter through GraphIndex), so that
// they break ties alike, and so that the fuzzers exercise the code the tools run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace xalloc::formats {

/// Whitespace-normalised source text: one space only between two identifier characters
/// ("return x", "a+b"); what an anchor's `expr` is compared by.
std::string normaliseExpression(const std::string& text);

/// A function's name without its template arguments, as Clang names the template's pattern:
/// "mix<float>" is "mix", "Net<int>::run<2>" is "Net::run"; an operator keeps its characters
/// ("operator<<", "operator< <int>" is "operator<"). Unbalanced brackets leave the name as it is.
std::string withoutTemplateArguments(const std::string& name);

/// A demangled function name as the source names the function: without template arguments, and
/// without the return type the demangler prints for a template's instantiation
/// ("at::Tensor (anonymous namespace)::mix<double>" is "(anonymous namespace)::mix").
std::string functionNameOnly(const std::string& name);

/// Whether an anchor's enclosing-function name and a qualified one agree: "forward" matches
/// "Model::forward" (a suffix after "::"), every name matches itself, and both are compared by
/// functionNameOnly: the debug information's "mix<float>" (an instantiation, where the profile
/// saw the call) is the source's function template "mix", where the rewrite edits it.
bool sameFunction(const std::string& anchor, const std::string& qualified);

/// The one tie-break among `count` places that match an anchor, in source order: its ordinal
/// when one is given (>= 0) and indexes one of them; else its line hint when exactly one of them
/// sits on that line (`line_of(i)`); else none, and the caller reports the anchor ambiguous.
/// A matcher whose matches already agree on the ordinal passes ordinal -1.
std::optional<std::size_t>
pickAmongMatches(std::size_t count, std::int64_t ordinal, std::int64_t line,
                 const std::function<std::int64_t(std::size_t)>& line_of);

} // namespace xalloc::formats
