// Any bytes as a JSON stream (JSON Lines, or documents one after another): parsed, or refused
// with InputError at a line and column. Nesting and number limits hold.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& doc : xalloc::formats::parseJsonStream(text, "fuzz.jsonl"))
      (void)xalloc::formats::dumpDocument(doc, true);
  } catch (const xalloc::InputError&) {
  }
  return 0;
}
