// The one grammar for byte sizes, shared by every flag (xsched --memory-budget, xprof
// --sweep-max, xsched memplan --budget), environment variable (XALLOC_CPU_LIMIT) and Python
// argument (xalloc.graceful(limit=...)):
//
//   SIZE  := NUMBER [UNIT]          surrounding blanks and blanks before UNIT are allowed
//   NUMBER:= DIGITS ["." DIGITS] | "." DIGITS
//   UNIT  := ("K" | "M" | "G" | "T") ["i"] ["B"]  |  "B"      case-insensitive; powers of 1024
//
// So 1048576, 512M, 512MB, 512MiB, 1.5KiB (1536), 8g and 2 GB are sizes; -1, 1e6, inf, nan,
// 12Q, M and "" are not, nor anything over 2^63 - 1 bytes. A fraction of a byte is dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace xalloc {

/// The size `text` names, or nullopt when it is not one (see the grammar above).
std::optional<std::int64_t> parseByteSize(std::string_view text);

/// The message for a text that is not a size: "cannot read 'TEXT' as a byte count (e.g. ...)".
std::string notAByteSize(std::string_view text);

/// parseByteSize, or InputError(tool, "FLAG: " + notAByteSize(text)).
std::int64_t requireByteSize(std::string_view text, const std::string& tool,
                             const std::string& flag);

} // namespace xalloc
