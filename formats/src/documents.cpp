// Document-level I/O: parse errors with line:col, JSON streams, envelopes and typed loading.
#include "xalloc/formats/documents.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/io.h"

namespace xalloc::formats {

const char* schemaName(DocKind kind) {
  switch (kind) {
  case DocKind::Profile:
    return kProfileSchema;
  case DocKind::Cost:
    return kCostSchema;
  case DocKind::Schedule:
    return kScheduleSchema;
  }
  return "";
}

std::int64_t schemaVersion(DocKind kind) {
  switch (kind) {
  case DocKind::Profile:
    return kProfileVersion;
  case DocKind::Cost:
    return kCostVersion;
  case DocKind::Schedule:
    return kScheduleVersion;
  }
  return 0;
}

std::int64_t oldestSchemaVersion(DocKind kind) {
  switch (kind) {
  case DocKind::Profile:
    return kProfileOldestVersion;
  case DocKind::Cost:
    return kCostVersion;
  case DocKind::Schedule:
    return kScheduleOldestVersion;
  }
  return 0;
}

namespace {

std::string lineCol(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// nlohmann's messages start with "[json.exception.parse_error.101] parse error at line 1,
// column 5: syntax error while parsing value - ..."; keep only the part after the last " - ".
std::string shortParseMessage(const std::string& what) {
  auto pos = what.rfind(" - ");
  std::string msg = pos == std::string::npos ? what : what.substr(pos + 3);
  if (auto p = msg.find("syntax error while parsing "); p == 0)
    msg = msg.substr(std::string("syntax error while parsing ").size());
  return msg;
}

// Scans JSON text from `begin`, tracking strings (brackets inside them do not count) and
// nesting. Refuses a value nested deeper than kMaxJsonDepth before it is parsed: the documents
// nest a few levels, and the readers (and the JSON library's own destructor) recurse per level.
// With `one_value`, stops at the end of the value that starts at `begin` (after whitespace) and
// returns the index one past its last character, or npos if the text ends first; otherwise
// scans the whole text and returns its size.
std::size_t scanJson(std::string_view text, std::size_t begin, bool one_value,
                     const std::string& name) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        throw InputError(name + ":" + lineCol(text, i),
                         "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels; no x-allocator document nests so deep");
    } else if (c == '}' || c == ']') {
      if (--depth <= 0 && one_value)
        return i + 1;
    } else if (one_value && depth == 0 && (c == '\n' || c == ' ' || c == '\t' || c == '\r')) {
      return i; // a scalar at top level ends at whitespace
    }
  }
  return one_value ? std::string_view::npos : text.size();
}

// The one parse of a value: malformed text and numbers out of a double's range become
// InputError at their place.
// The text from `begin` to `end` has been scanned (scanJson).
nlohmann::json parseAt(std::string_view text, std::size_t begin, std::size_t end,
                       const std::string& name) {
  try {
    return nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(begin),
                                 text.begin() + static_cast<std::ptrdiff_t>(end));
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(name + ":" + lineCol(text, begin + (e.byte > 0 ? e.byte - 1 : 0)),
                     "malformed JSON: " + shortParseMessage(e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    // "number overflow parsing '1e999'": no position from the library; the number says where.
    const std::string what = e.what();
    const auto q = what.find('\'');
    const std::string number =
        q == std::string::npos ? "" : what.substr(q + 1, what.find('\'', q + 1) - q - 1);
    const auto at = number.empty() ? std::string_view::npos : text.find(number, begin);
    throw InputError(at == std::string_view::npos ? name : name + ":" + lineCol(text, at),
                     "number " + (number.empty() ? std::string("") : number + " ") +
                         "is out of range: larger than a double holds");
  }
}

} // namespace

nlohmann::json parseJson(std::string_view text, const std::string& name) {
  return parseAt(text, 0, scanJson(text, 0, false, name), name);
}

std::vector<nlohmann::json> parseJsonStream(std::string_view text, const std::string& name) {
  std::vector<nlohmann::json> out;
  std::size_t pos = 0;
  auto isSpace = [](char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
  };
  while (true) {
    while (pos < text.size() && isSpace(text[pos]))
      ++pos;
    if (pos >= text.size())
      break;
    std::size_t end = scanJson(text, pos, true, name);
    if (end == std::string_view::npos)
      end = text.size(); // let the parser report what is wrong with the tail
    out.push_back(parseAt(text, pos, end, name));
    pos = end;
  }
  return out;
}

std::string schemaOf(const nlohmann::json& doc) {
  if (!doc.is_object())
    return "";
  auto it = doc.find("schema");
  if (it == doc.end() || !it->is_string())
    return "";
  return it->get<std::string>();
}

void checkEnvelope(const nlohmann::json& doc, DocKind kind) {
  JsonReader r(doc);
  if (!doc.is_object())
    r.fail(std::string("expected a ") + schemaName(kind) + " document (a JSON object)");
  std::string schema = r.getString("schema");
  if (schema != schemaName(kind))
    r.at("schema").fail("unknown schema '" + schema + "', expected '" + schemaName(kind) + "'");
  std::int64_t version = r.getInt("schema_version");
  if (kind == DocKind::Schedule && version == 1)
    r.at("schema_version")
        .fail("schema_version 1 of 'xalloc.schedule' is from before layout targets (this build "
              "reads version " +
              std::to_string(kScheduleVersion) +
              ", where every decision names the layout it makes): run xsched again on the "
              "profile");
  const std::int64_t oldest = oldestSchemaVersion(kind), newest = schemaVersion(kind);
  if (version < oldest || version > newest)
    r.at("schema_version")
        .fail("unsupported schema_version " + std::to_string(version) + " of '" + schema +
              "' (this build reads version " +
              (oldest == newest ? std::to_string(newest)
                                : std::to_string(oldest) + " to " + std::to_string(newest)) +
              ")");
}

namespace {
template <class T, class F>
T typedFromJson(const nlohmann::json& doc, DocKind kind, const std::string& name, F read) {
  try {
    checkEnvelope(doc, kind);
    return read(JsonReader(doc));
  } catch (const FormatError& e) {
    throw inputErrorAt(e, name);
  }
}
} // namespace

Profile profileFromJson(const nlohmann::json& doc, const std::string& name) {
  return typedFromJson<Profile>(doc, DocKind::Profile, name, readProfile);
}
Cost costFromJson(const nlohmann::json& doc, const std::string& name) {
  return typedFromJson<Cost>(doc, DocKind::Cost, name, readCost);
}
Schedule scheduleFromJson(const nlohmann::json& doc, const std::string& name) {
  return typedFromJson<Schedule>(doc, DocKind::Schedule, name, readSchedule);
}

std::string dumpDocument(const nlohmann::json& doc, bool compact) {
  // A number that is not finite would be written as null, which no schema allows: refused,
  // with where it is (an overflow in what the tool computed from its inputs).
  std::vector<std::pair<const nlohmann::json*, std::string>> todo{{&doc, ""}};
  while (!todo.empty()) {
    auto [v, at] = todo.back();
    todo.pop_back();
    if (v->is_number_float() && !std::isfinite(v->get<double>()))
      throw InputError(schemaOf(doc).empty() ? std::string("output") : schemaOf(doc),
                       "cannot write " + std::string(at.empty() ? "/" : at) +
                           ": the number is not finite (the inputs hold values too large to "
                           "add up)");
    if (v->is_object())
      for (auto it = v->begin(); it != v->end(); ++it)
        todo.emplace_back(&*it, at + "/" + it.key());
    else if (v->is_array())
      for (std::size_t i = 0; i < v->size(); ++i)
        todo.emplace_back(&(*v)[i], at + "/" + std::to_string(i));
  }
  // nlohmann::json objects are std::map-backed: keys come out sorted, so output is deterministic.
  return compact ? doc.dump() + "\n" : doc.dump(2) + "\n";
}

DocumentSet DocumentSet::read(const std::string& path) {
  std::string name = path == "-" ? "<stdin>" : path;
  return fromText(readFile(path), name);
}

DocumentSet DocumentSet::fromText(std::string_view text, const std::string& name) {
  DocumentSet set;
  set.name_ = name;
  set.docs_ = parseJsonStream(text, name);
  if (set.docs_.empty())
    throw InputError(name, "no JSON document in the input");
  return set;
}

const nlohmann::json* DocumentSet::find(DocKind kind) const {
  for (auto it = docs_.rbegin(); it != docs_.rend(); ++it)
    if (schemaOf(*it) == schemaName(kind))
      return &*it;
  return nullptr;
}

const nlohmann::json& DocumentSet::require(DocKind kind) const {
  if (const auto* doc = find(kind))
    return *doc;
  // A single document of another kind: let the envelope check explain what is wrong with it.
  if (docs_.size() == 1) {
    try {
      checkEnvelope(docs_.front(), kind);
    } catch (const FormatError& e) {
      throw inputErrorAt(e, name_);
    }
  }
  throw InputError(name_, std::string("no '") + schemaName(kind) + "' document in the input");
}

Profile loadProfile(const std::string& path) {
  auto set = DocumentSet::read(path);
  return profileFromJson(set.require(DocKind::Profile), set.name());
}
Cost loadCost(const std::string& path) {
  auto set = DocumentSet::read(path);
  return costFromJson(set.require(DocKind::Cost), set.name());
}
Schedule loadSchedule(const std::string& path) {
  auto set = DocumentSet::read(path);
  return scheduleFromJson(set.require(DocKind::Schedule), set.name());
}

void emitDocument(const std::string& output, const std::vector<nlohmann::json>& passthrough,
                  const nlohmann::json& doc) {
  if (!output.empty()) {
    writeFileAtomic(output, dumpDocument(doc, /*compact=*/output == "-"));
    return;
  }
  std::string text;
  for (const auto& d : passthrough)
    text += dumpDocument(d, true);
  text += dumpDocument(doc, true);
  writeFileAtomic("-", text);
}

} // namespace xalloc::formats
