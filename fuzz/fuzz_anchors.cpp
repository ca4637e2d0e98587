// The schedule's anchor matching as xrewrite uses it: two decisions read from fuzzed schedules
// are the same expression or not (formats::sameExpression, Anchor::sameSite), symmetrically,
// and a decision is always the same expression as itself.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"

using namespace xalloc::formats;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const DocumentSet set = DocumentSet::fromText(text, "fuzz.json");
    for (const auto& doc : set.documents()) {
      if (schemaOf(doc) != kScheduleSchema)
        continue;
      const Schedule s = scheduleFromJson(doc, "fuzz.json");
      for (const auto& a : s.decisions) {
        if (!a.anchor.sameSite(a.anchor) || !sameExpression(a, a))
          __builtin_trap();
        for (const auto& b : s.decisions)
          if (sameExpression(a, b) != sameExpression(b, a) ||
              a.anchor.sameSite(b.anchor) != b.anchor.sameSite(a.anchor))
            __builtin_trap();
      }
    }
  } catch (const xalloc::InputError&) {
  } catch (const xalloc::FormatError&) {
  }
  return 0;
}
