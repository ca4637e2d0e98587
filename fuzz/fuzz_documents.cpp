// Any bytes as a document set: each document read by its typed reader (profile, cost,
// schedule). Bad input must end in InputError (FormatError located); anything else (a crash, a
// sanitizer report, LogicError, another exception) is a finding. What a reader accepts must
// also write out and read back the same (the writers and readers are one truth).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"

using namespace xalloc;
using namespace xalloc::formats;

namespace {

template <typename Read> void roundTrip(const nlohmann::json& doc, Read read) {
  const auto typed = read(doc, "doc.json");
  const std::string text = dumpDocument(toJson(typed), true);
  const auto again = read(parseJson(text, "again.json"), "again.json");
  if (dumpDocument(toJson(again), true) != text)
    __builtin_trap(); // written and read back, it changed
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const DocumentSet set = DocumentSet::fromText(text, "fuzz.json");
    for (const auto& doc : set.documents()) {
      const std::string kind = schemaOf(doc);
      try {
        if (kind == kProfileSchema)
          roundTrip(doc, profileFromJson);
        else if (kind == kCostSchema)
          roundTrip(doc, costFromJson);
        else if (kind == kScheduleSchema)
          roundTrip(doc, scheduleFromJson);
      } catch (const InputError&) {
      } catch (const FormatError&) {
      }
    }
  } catch (const InputError&) {
  }
  return 0;
}
