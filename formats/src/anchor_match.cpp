// The anchor matchers' shared pieces (anchor_match.h).
#include "xalloc/formats/anchor_match.h"

#include <cctype>
#include <string_view>

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

std::string withoutTemplateArguments(const std::string& name) {
  // C++'s operator tokens, longest first: the name of `operator<<` is not an argument list.
  static constexpr std::string_view kOperators[] = {
      "<=>", "<<=", ">>=", "->*", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++",
      "--",  "+=",  "-=",  "*=",  "/=", "%=", "^=", "&=", "|=", "->", "()", "[]", "<",
      ">",   "=",   "+",   "-",   "*",  "/",  "%",  "^",  "&",  "|",  "~",  "!",  ","};
  auto ident = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  std::string out;
  out.reserve(name.size());
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (depth == 0 && name.compare(i, 8, "operator") == 0 && (i == 0 || !ident(name[i - 1])) &&
        (i + 8 == name.size() || !ident(name[i + 8]))) {
      std::size_t end = i + 8;
      for (std::string_view op : kOperators)
        if (name.compare(end, op.size(), op) == 0) {
          end += op.size();
          break;
        }
      out.append(name, i, end - i);
      i = end - 1;
      continue;
    }
    const char c = name[i];
    if (c == '<') {
      if (depth == 0 && !out.empty() && out.back() == ' ')
        out.pop_back(); // "operator< <int>": the demangler's space before the arguments
      ++depth;
    } else if (c == '>' && depth > 0) {
      --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  return depth == 0 ? out : name; // unbalanced: not an argument list after all
}

std::string functionNameOnly(const std::string& name) {
  const std::string n = withoutTemplateArguments(name);
  // The last space outside parentheses ("(anonymous namespace)" has one) that does not follow
  // `operator` ("operator new", "operator int") ends a return type.
  int depth = 0;
  std::size_t cut = std::string::npos;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (n[i] == '(')
      ++depth;
    else if (n[i] == ')' && depth > 0)
      --depth;
    else if (n[i] == ' ' && depth == 0 && !(i >= 8 && n.compare(i - 8, 8, "operator") == 0))
      cut = i;
  }
  return cut == std::string::npos ? n : n.substr(cut + 1);
}

bool sameFunction(const std::string& anchor, const std::string& qualified) {
  if (anchor == qualified)
    return true;
  const std::string a = functionNameOnly(anchor);
  const std::string q = functionNameOnly(qualified);
  if (a == q)
    return true;
  return q.size() > a.size() && q.compare(q.size() - a.size(), a.size(), a) == 0 &&
         q[q.size() - a.size() - 1] == ':';
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
