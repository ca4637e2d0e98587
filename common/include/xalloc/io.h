// File helpers every tool shares: whole-file reads with clear errors, atomic writes (temp file +
// rename, so a reader never sees half a file), and SHA-256 of a file's bytes.
#pragma once

#include <string>
#include <string_view>

namespace xalloc {

/// Reads a whole file; "-" reads stdin. Throws InputError("path", reason) when it cannot.
std::string readFile(const std::string& path);

/// Writes `content` to `path` atomically: a temp file in the same folder, then rename(2), then
/// the folder synced. "-" writes to stdout; a device or a pipe (/dev/null, /dev/stdout, a FIFO)
/// is written in place; a symbolic link is followed and its target replaced (the link stays).
/// A file replaced keeps its permissions. The temp file is removed on failure and when SIGINT,
/// SIGTERM or SIGHUP ends the process (removeTempFilesOnSignals). Throws InputError on failure
/// and leaves a regular `path` untouched.
void writeFileAtomic(const std::string& path, std::string_view content);

/// Refuses an output before any work is done: a directory, a folder that does not exist, a
/// place that cannot be written. "" and "-" (stdout) pass. Throws InputError("path", why).
void checkOutputPath(const std::string& path);

/// True when `a` and `b` name the same file: the same inode when both exist, else the same path
/// once links, `.` and `..` are resolved.
bool samePath(const std::string& a, const std::string& b);

/// Installs handlers for SIGINT, SIGTERM and SIGHUP (those not ignored) that remove the temp
/// files in flight (writeFileAtomic's, TempFile's), then end the process as the signal would.
/// runGuarded calls it; calling it again does nothing.
void removeTempFilesOnSignals();

/// A temporary file in the system's temp folder ($TMPDIR, else /tmp), removed when destroyed
/// and when a signal ends the process.
class TempFile {
public:
  explicit TempFile(const std::string& stem);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
  int slot_ = -1;
};

/// Lowercase hex SHA-256 of bytes.
std::string sha256Hex(std::string_view bytes);
/// SHA-256 of a file's contents.
std::string sha256File(const std::string& path);

/// True if the file exists and is a regular file.
bool isRegularFile(const std::string& path);

/// The running program's file (/proc/self/exe), "" when unknown; and its folder ("." then).
std::string selfExePath();
std::string selfDir();

/// Replaces this process with the program `name` in selfDir(), with `argv` as given (a tool's
/// front handing its core the same command line). Returns only when that fails: then it prints
/// "tool: error: cannot run PATH: why" and gives 2.
int execBeside(const std::string& tool, const std::string& name, char** argv);

} // namespace xalloc
