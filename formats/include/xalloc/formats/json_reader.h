// Typed, validating access to a parsed JSON value that remembers its JSON Pointer, so every
// complaint about a document names the exact field ("/records/3/sizes: expected an array").
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/enums.h"

namespace xalloc::formats {

/// A schema violation at a JSON Pointer (xalloc/error.h, so that every tool's error handling
/// knows it without knowing the documents).
using xalloc::FormatError;
using xalloc::inputErrorAt;

/// Escapes one reference token for a JSON Pointer (RFC 6901: '~' -> "~0", '/' -> "~1").
std::string escapePointerToken(std::string_view token);

class JsonReader {
public:
  explicit JsonReader(const nlohmann::json& value, std::string pointer = "");

  const nlohmann::json& json() const noexcept { return *value_; }
  const std::string& pointer() const noexcept { return pointer_; }
  /// Human-readable pointer: "/" for the root.
  std::string where() const { return pointer_.empty() ? "/" : pointer_; }

  /// A required member of an object.
  JsonReader at(std::string_view key) const;
  /// An optional member; absent and null both give nullopt.
  std::optional<JsonReader> find(std::string_view key) const;
  /// An element of an array.
  JsonReader at(std::size_t index) const;
  /// Number of elements of an array (fails if this is not an array).
  std::size_t size() const;

  bool isNull() const;
  bool toBool() const;
  std::int64_t toInt() const;
  /// Integer that must be >= 0.
  std::int64_t toCount() const;
  /// Finite number (integers accepted).
  double toNumber() const;
  /// Finite number >= 0.
  double toNonNegative() const;
  std::string toString() const;
  /// One of an enum's names (enums.h); fails naming them all otherwise.
  template <class E> E toEnum() const {
    const std::string text = toString();
    if (auto e = fromString<E>(text))
      return *e;
    fail("expected " + namesOf<E>() + ", got '" + text + "'");
  }
  std::vector<std::int64_t> toIntVector() const;
  std::vector<double> toNumberVector() const;
  std::vector<std::string> toStringVector() const;

  /// Calls f(JsonReader element) for each element of an array.
  template <class F> void forEach(F&& f) const {
    const std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i)
      f(at(i));
  }

  /// Required member helpers.
  std::string getString(std::string_view key) const { return at(key).toString(); }
  std::int64_t getInt(std::string_view key) const { return at(key).toInt(); }
  double getNumber(std::string_view key) const { return at(key).toNumber(); }
  bool getBool(std::string_view key) const { return at(key).toBool(); }
  /// Optional member helpers with a default.
  std::string getString(std::string_view key, std::string def) const;
  std::int64_t getInt(std::string_view key, std::int64_t def) const;
  double getNumber(std::string_view key, double def) const;
  double getNonNegative(std::string_view key, double def) const;
  bool getBool(std::string_view key, bool def) const;
  std::optional<double> getOptionalNumber(std::string_view key) const;
  std::optional<std::int64_t> getOptionalInt(std::string_view key) const;

  [[noreturn]] void fail(const std::string& message) const;

private:
  void expectObject() const;
  void expectArray() const;
  const nlohmann::json* value_;
  std::string pointer_;
};

} // namespace xalloc::formats
