// File helpers every tool shares: whole-file reads with clear errors, atomic writes (temp file +
// rename, so a reader never sees half a file), and SHA-256 of a file's bytes.
#pragma once

#include <string>
#include <string_view>

namespace xalloc {

/// Reads a whole file; "-" reads stdin. Throws InputError("path", reason) when it cannot.
std::string readFile(const std::string& path);

/// Writes `content` to `path` atomically: a temp file in the same folder, then rename(2).
/// "-" writes to stdout; a device or a pipe (/dev/null, /dev/stdout, a FIFO) is written in
/// place. Throws InputError on failure and leaves a regular `path` untouched.
void writeFileAtomic(const std::string& path, std::string_view content);

/// Lowercase hex SHA-256 of bytes.
std::string sha256Hex(std::string_view bytes);
/// SHA-256 of a file's contents.
std::string sha256File(const std::string& path);

/// True if the file exists and is a regular file.
bool isRegularFile(const std::string& path);

/// The running program's file (/proc/self/exe), "" when unknown; and its folder ("." then).
std::string selfExePath();
std::string selfDir();

} // namespace xalloc
