// JsonReader: validating accessors that report the JSON Pointer of a bad field.
#include "xalloc/formats/json_reader.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace xalloc::formats {

namespace {
const char* typeName(const nlohmann::json& j) {
  switch (j.type()) {
  case nlohmann::json::value_t::null:
    return "null";
  case nlohmann::json::value_t::object:
    return "an object";
  case nlohmann::json::value_t::array:
    return "an array";
  case nlohmann::json::value_t::string:
    return "a string";
  case nlohmann::json::value_t::boolean:
    return "a boolean";
  case nlohmann::json::value_t::number_integer:
  case nlohmann::json::value_t::number_unsigned:
    return "an integer";
  case nlohmann::json::value_t::number_float:
    return "a number";
  default:
    return "an unsupported value";
  }
}
} // namespace

std::string escapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

JsonReader::JsonReader(const nlohmann::json& value, std::string pointer)
    : value_(&value), pointer_(std::move(pointer)) {}

void JsonReader::fail(const std::string& message) const {
  throw FormatError(pointer_, message);
}

void JsonReader::expectObject() const {
  if (!value_->is_object())
    fail(std::string("expected an object, got ") + typeName(*value_));
}

void JsonReader::expectArray() const {
  if (!value_->is_array())
    fail(std::string("expected an array, got ") + typeName(*value_));
}

JsonReader JsonReader::at(std::string_view key) const {
  expectObject();
  auto it = value_->find(key);
  std::string child = pointer_ + "/" + escapePointerToken(key);
  if (it == value_->end())
    throw FormatError(child, "missing required field '" + std::string(key) + "'");
  return JsonReader(*it, std::move(child));
}

std::optional<JsonReader> JsonReader::find(std::string_view key) const {
  expectObject();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null())
    return std::nullopt;
  return JsonReader(*it, pointer_ + "/" + escapePointerToken(key));
}

JsonReader JsonReader::at(std::size_t index) const {
  expectArray();
  std::string child = pointer_ + "/" + std::to_string(index);
  if (index >= value_->size())
    throw FormatError(child, "index out of range");
  return JsonReader((*value_)[index], std::move(child));
}

std::size_t JsonReader::size() const {
  expectArray();
  return value_->size();
}

bool JsonReader::isNull() const {
  return value_->is_null();
}

bool JsonReader::toBool() const {
  if (!value_->is_boolean())
    fail(std::string("expected a boolean, got ") + typeName(*value_));
  return value_->get<bool>();
}

std::int64_t JsonReader::toInt() const {
  if (value_->is_number_unsigned()) {
    auto u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX))
      fail("integer out of range");
    return static_cast<std::int64_t>(u);
  }
  if (!value_->is_number_integer())
    fail(std::string("expected an integer, got ") + typeName(*value_));
  return value_->get<std::int64_t>();
}

std::int64_t JsonReader::toCount() const {
  std::int64_t v = toInt();
  if (v < 0)
    fail("expected a non-negative integer, got " + std::to_string(v));
  return v;
}

double JsonReader::toNumber() const {
  if (!value_->is_number())
    fail(std::string("expected a number, got ") + typeName(*value_));
  double v = value_->get<double>();
  if (!std::isfinite(v))
    fail("expected a finite number");
  return v;
}

double JsonReader::toNonNegative() const {
  double v = toNumber();
  if (v < 0)
    fail("expected a non-negative number, got " + value_->dump());
  return v;
}

std::string JsonReader::toString() const {
  if (!value_->is_string())
    fail(std::string("expected a string, got ") + typeName(*value_));
  return value_->get<std::string>();
}

std::vector<std::int64_t> JsonReader::toIntVector() const {
  std::vector<std::int64_t> out;
  out.reserve(size());
  forEach([&](const JsonReader& e) { out.push_back(e.toInt()); });
  return out;
}

std::vector<double> JsonReader::toNumberVector() const {
  std::vector<double> out;
  out.reserve(size());
  forEach([&](const JsonReader& e) { out.push_back(e.toNumber()); });
  return out;
}

std::vector<std::string> JsonReader::toStringVector() const {
  std::vector<std::string> out;
  out.reserve(size());
  forEach([&](const JsonReader& e) { out.push_back(e.toString()); });
  return out;
}

std::string JsonReader::getString(std::string_view key, std::string def) const {
  auto f = find(key);
  return f ? f->toString() : std::move(def);
}
std::int64_t JsonReader::getInt(std::string_view key, std::int64_t def) const {
  auto f = find(key);
  return f ? f->toInt() : def;
}
double JsonReader::getNumber(std::string_view key, double def) const {
  auto f = find(key);
  return f ? f->toNumber() : def;
}
double JsonReader::getNonNegative(std::string_view key, double def) const {
  auto f = find(key);
  return f ? f->toNonNegative() : def;
}
bool JsonReader::getBool(std::string_view key, bool def) const {
  auto f = find(key);
  return f ? f->toBool() : def;
}
std::optional<double> JsonReader::getOptionalNumber(std::string_view key) const {
  auto f = find(key);
  if (!f)
    return std::nullopt;
  return f->toNumber();
}
std::optional<std::int64_t> JsonReader::getOptionalInt(std::string_view key) const {
  auto f = find(key);
  if (!f)
    return std::nullopt;
  return f->toInt();
}

} // namespace xalloc::formats
