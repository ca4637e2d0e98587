// Out-of-line parts of xalloc/error.h.
#include "xalloc/error.h"

namespace xalloc::detail {

void throwLogicError(const char* file, int line, const std::string& msg) {
  throw LogicError(std::string(file) + ":" + std::to_string(line) + ": " + msg);
}

} // namespace xalloc::detail
