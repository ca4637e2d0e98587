// The anchor matchers' shared pieces (anchor_match.h).
#include "xalloc/formats/anchor_match.h"

#include <cctype>

namespace xalloc::formats {

std::string normaliseExpression(const std::string& text) {
  std::string out;
  bool space = false;
  auto ident = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    // Keep one space only between two identifier characters ("return x", not "a + b").
    if (space && !out.empty() && ident(out.back()) && ident(c))
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

bool sameFunction(const std::string& anchor, const std::string& qualified) {
  if (anchor == qualified)
    return true;
  return qualified.size() > anchor.size() &&
         qualified.compare(qualified.size() - anchor.size(), anchor.size(), anchor) == 0 &&
         qualified[qualified.size() - anchor.size() - 1] == ':';
}

std::optional<std::size_t>
pickAmongMatches(std::size_t count, std::int64_t ordinal, std::int64_t line,
                 const std::function<std::int64_t(std::size_t)>& line_of) {
  if (count == 0)
    return std::nullopt;
  if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < count)
    return static_cast<std::size_t>(ordinal);
  // The ordinal does not fit (the function changed): the line hint decides, if unique. The
  // ordinal comes first, so edits above the site (an added #include) move nothing.
  std::optional<std::size_t> on_line;
  for (std::size_t i = 0; i < count; ++i)
    if (line_of(i) == line) {
      if (on_line)
        return std::nullopt;
      on_line = i;
    }
  return on_line;
}

} // namespace xalloc::formats
