// Out-of-line parts of xalloc/error.h.
#include "xalloc/error.h"

namespace xalloc {

std::string firstLine(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  if (line.size() > 200)
    line = line.substr(0, 200) + "...";
  return line;
}

} // namespace xalloc

namespace xalloc::detail {

void throwLogicError(const char* file, int line, const std::string& msg) {
  throw LogicError(std::string(file) + ":" + std::to_string(line) + ": " + msg);
}

} // namespace xalloc::detail
