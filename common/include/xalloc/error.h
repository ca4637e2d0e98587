// Error types shared by every x-allocator tool, and the EXPECTS-style check macros.
// InputError is a problem with what the user gave us (a file, a document, a flag): tools print it
// in compiler style ("where: error: what") and exit with code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace xalloc {

/// Process exit codes used by every tool.
enum ExitCode : int { kExitOk = 0, kExitChangesNeeded = 1, kExitError = 2 };

/// Base class of all x-allocator errors.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A problem with user input. `where` is "path:line:col", "path: /json/pointer" or a tool name.
class InputError : public Error {
public:
  InputError(std::string where, std::string message)
      : Error(where.empty() ? message : where + ": " + message), where_(std::move(where)),
        message_(std::move(message)) {}
  const std::string& where() const noexcept { return where_; }
  const std::string& message() const noexcept { return message_; }

private:
  std::string where_;
  std::string message_;
};

/// A problem at a JSON Pointer inside a document (a schema violation found by a reader). Readers
/// of files turn it into an InputError that names the file too (inputErrorAt).
class FormatError : public Error {
public:
  FormatError(std::string pointer, const std::string& message)
      : Error(message), pointer_(std::move(pointer)) {}
  /// RFC 6901 pointer of the offending value; "" is the whole document.
  const std::string& pointer() const noexcept { return pointer_; }

private:
  std::string pointer_;
};

/// The user-facing form of a FormatError found in the document called `name`:
/// InputError("name: /json/pointer", message).
InputError inputErrorAt(const FormatError& e, const std::string& name);

/// A broken internal invariant: a bug in x-allocator, not in the input.
class LogicError : public Error {
public:
  using Error::Error;
};

/// The first line of an exception's message, at most 200 characters: libtorch appends a C++
/// backtrace to its messages, and a tool reports errors in one line.
std::string firstLine(const std::string& message);

namespace detail {
[[noreturn]] void throwLogicError(const char* file, int line, const std::string& msg);
} // namespace detail

} // namespace xalloc

/// Checks an internal invariant; throws xalloc::LogicError stamped with file:line when it fails.
#define XALLOC_EXPECTS(cond, msg)                                                                  \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::xalloc::detail::throwLogicError(__FILE__, __LINE__,                                        \
                                        std::string("expected ") + #cond + ": " + (msg));          \
  } while (0)
