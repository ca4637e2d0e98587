// The schedule's anchor matching as xrewrite uses it: two decisions read from fuzzed schedules
// are the same expression or not (formats::sameExpression, Anchor::sameSite), symmetrically,
// and a decision is always the same expression as itself. And the matchers' shared pieces
// (anchor_match.h), which xrewrite --cpp and the graph rewriter run: the expression text's
// normalisation is idempotent and keeps no space but between identifiers, a function matches
// itself, and the tie-break picks a match that exists, by the ordinal when it indexes one and
// else only a match alone on the anchor's line.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "xalloc/error.h"
#include "xalloc/formats/anchor_match.h"
#include "xalloc/formats/documents.h"

using namespace xalloc::formats;

namespace {

void checkMatchers(const std::string& expr, const Anchor& a, const std::uint8_t* data,
                   std::size_t size) {
  const std::string n = normaliseExpression(expr);
  if (normaliseExpression(n) != n || (!n.empty() && (n.front() == ' ' || n.back() == ' ')))
    __builtin_trap();
  for (std::size_t i = 1; i + 1 < n.size(); ++i)
    if (n[i] == ' ' && !(std::isalnum(static_cast<unsigned char>(n[i - 1])) || n[i - 1] == '_'))
      __builtin_trap();
  if (!sameFunction(a.function, a.function))
    __builtin_trap();
  // Match lines taken from the input's bytes: up to 16 matches on lines 1..8.
  const std::size_t count = size % 17;
  auto line_of = [&](std::size_t i) {
    return static_cast<std::int64_t>(1 + data[i % size] % 8);
  };
  const auto pick = pickAmongMatches(count, a.ordinal, a.line, line_of);
  if (pick && *pick >= count)
    __builtin_trap();
  if (a.ordinal >= 0 && static_cast<std::size_t>(a.ordinal) < count &&
      pick != static_cast<std::size_t>(a.ordinal))
    __builtin_trap();
  if (pick && !(a.ordinal >= 0 && static_cast<std::size_t>(a.ordinal) < count)) {
    std::size_t on_line = 0;
    for (std::size_t i = 0; i < count; ++i)
      on_line += line_of(i) == a.line;
    if (line_of(*pick) != a.line || on_line != 1)
      __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (size > 0) {
    Anchor raw;
    raw.ordinal = static_cast<std::int64_t>(data[0] % 20) - 2;
    raw.line = 1 + data[size - 1] % 8;
    raw.function = std::string(text.substr(0, std::min<std::size_t>(size, 24)));
    checkMatchers(std::string(text), raw, data, size);
  }
  try {
    const DocumentSet set = DocumentSet::fromText(text, "fuzz.json");
    for (const auto& doc : set.documents()) {
      if (schemaOf(doc) != kScheduleSchema)
        continue;
      const Schedule s = scheduleFromJson(doc, "fuzz.json");
      for (const auto& a : s.decisions) {
        if (!a.anchor.sameSite(a.anchor) || !sameExpression(a, a))
          __builtin_trap();
        checkMatchers(a.anchor.expr, a.anchor, data, size);
        for (const auto& b : s.decisions)
          if (sameExpression(a, b) != sameExpression(b, a) ||
              a.anchor.sameSite(b.anchor) != b.anchor.sameSite(a.anchor))
            __builtin_trap();
      }
    }
  } catch (const xalloc::InputError&) {
  } catch (const xalloc::FormatError&) {
  }
  return 0;
}
