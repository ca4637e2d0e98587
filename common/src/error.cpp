// Out-of-line parts of xalloc/error.h.
#include "xalloc/error.h"

namespace xalloc {

InputError inputErrorAt(const FormatError& e, const std::string& name) {
  return InputError(name + ": " + (e.pointer().empty() ? "/" : e.pointer()), e.what());
}

std::string firstLine(const std::string& message) {
  // The first line with text: some libtorch messages start with a newline.
  const std::size_t start = message.find_first_not_of(" \t\r\n");
  if (start == std::string::npos)
    return "";
  std::string line = message.substr(start, message.find('\n', start) - start);
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
