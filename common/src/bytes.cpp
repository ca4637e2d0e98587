// parseByteSize: the byte-size grammar of xalloc/bytes.h.
#include "xalloc/bytes.h"

#include <cctype>
#include <cmath>

#include "xalloc/error.h"

namespace xalloc {

namespace {
bool blank(char c) {
  return c == ' ' || c == '\t';
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}
} // namespace

std::optional<std::int64_t> parseByteSize(std::string_view text) {
  std::size_t i = 0, n = text.size();
  while (i < n && blank(text[i]))
    ++i;
  while (n > i && blank(text[n - 1]))
    --n;
  // NUMBER: exact integer part, fraction kept apart so that large integers stay exact.
  long double whole = 0, fraction = 0, scale = 1;
  bool any = false;
  for (; i < n && digit(text[i]); ++i, any = true) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > 1e20L)
      return std::nullopt;
  }
  if (i < n && text[i] == '.') {
    ++i;
    bool frac = false;
    for (; i < n && digit(text[i]); ++i, frac = true)
      fraction += (text[i] - '0') * (scale /= 10);
    if (!frac)
      return std::nullopt; // "1." is not a number here
    any = true;
  }
  if (!any)
    return std::nullopt;
  while (i < n && blank(text[i]))
    ++i;
  // UNIT
  long double mult = 1;
  if (i < n) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    const char* const units = "KMGT";
    int power = 0;
    for (int k = 0; k < 4; ++k)
      if (u == units[k])
        power = k + 1;
    if (power > 0) {
      mult = std::pow(1024.0L, power);
      ++i;
      if (i < n && (text[i] == 'i' || text[i] == 'I'))
        ++i;
    }
    if (i < n && (text[i] == 'B' || text[i] == 'b'))
      ++i;
    if (i != n)
      return std::nullopt;
  }
  const long double bytes = std::floor((whole + fraction) * mult);
  if (!(bytes >= 0) || bytes > 9223372036854775807.0L)
    return std::nullopt;
  // Integers below 2^63 are exact in a long double (64-bit mantissa).
  return static_cast<std::int64_t>(bytes);
}

std::string notAByteSize(std::string_view text) {
  return "cannot read '" + std::string(text) + "' as a byte count (e.g. 1048576, 512M, 8G)";
}

std::int64_t requireByteSize(std::string_view text, const std::string& tool,
                             const std::string& flag) {
  if (auto b = parseByteSize(text))
    return *b;
  throw InputError(tool, flag + ": " + notAByteSize(text));
}

} // namespace xalloc
