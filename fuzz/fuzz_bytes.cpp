// Any text as a byte size (xalloc/bytes.h, the grammar of every size flag, XALLOC_CPU_LIMIT and
// Python's limit=): a size is never negative, never beyond int64, and the same text parses the
// same way twice; anything else is refused with the one message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "xalloc/bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto a = xalloc::parseByteSize(text);
  const auto b = xalloc::parseByteSize(std::string(text));
  if (a != b || (a && *a < 0))
    __builtin_trap();
  if (!a && xalloc::notAByteSize(text).empty())
    __builtin_trap();
  return 0;
}
