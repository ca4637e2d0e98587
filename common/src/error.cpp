// Out-of-line parts of xalloc/error.h.
#include "xalloc/error.h"

namespace xalloc {

InputError inputErrorAt(const FormatError& e, const std::string& name) {
  return InputError(name + ": " + (e.pointer().empty() ? "/" : e.pointer()), e.what());
}

std::string firstLine(const std::string& message) {
  // The first line with text: some libtorch messages start with a newline.
  std::size_t start = message.find_first_not_of(" \t\r\n");
  if (start == std::string::npos)
    return "";
  // The TorchScript interpreter's message opens with "The following operation failed in the
  // TorchScript interpreter." and a traceback; the error itself is its last line with text.
  static const std::string kInterpreter = "The following operation failed in the TorchScript";
  if (message.compare(start, kInterpreter.size(), kInterpreter) == 0) {
    const std::size_t end = message.find_last_not_of(" \t\r\n");
    const std::size_t nl = message.rfind('\n', end);
    if (nl != std::string::npos && nl > start)
      start = nl + 1;
  }
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
