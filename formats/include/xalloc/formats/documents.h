// Reading and writing whole documents: JSON parsing with line:col errors, streams of documents
// (JSON Lines, as tools pass them through pipes), the schema/schema_version envelope, and
// deterministic output (sorted keys, compact for streams, indented for files).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "xalloc/formats/cost.h"
#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"

namespace xalloc::formats {

enum class DocKind { Profile, Cost, Schedule };
const char* schemaName(DocKind kind);
/// The version this build writes, and the oldest it still reads.
std::int64_t schemaVersion(DocKind kind);
std::int64_t oldestSchemaVersion(DocKind kind);

/// How deep a JSON value may nest: deeper text is refused before it is parsed.
inline constexpr int kMaxJsonDepth = 256;

/// Parses one JSON value. A syntax error throws InputError("name:line:col", "malformed JSON: …");
/// so do a value nested deeper than kMaxJsonDepth and a number beyond a double's range.
nlohmann::json parseJson(std::string_view text, const std::string& name);

/// Parses a stream of JSON values: JSON Lines, or documents simply written one after another.
std::vector<nlohmann::json> parseJsonStream(std::string_view text, const std::string& name);

/// Checks "schema" and "schema_version"; throws FormatError naming what was found and expected.
void checkEnvelope(const nlohmann::json& doc, DocKind kind);

/// The value of "schema" if doc is an object carrying one, else "".
std::string schemaOf(const nlohmann::json& doc);

/// Typed readers of a parsed document; `name` is the file name used in diagnostics.
/// Any schema violation becomes InputError("name: /json/pointer", message).
Profile profileFromJson(const nlohmann::json& doc, const std::string& name);
Cost costFromJson(const nlohmann::json& doc, const std::string& name);
Schedule scheduleFromJson(const nlohmann::json& doc, const std::string& name);

/// Serializes a document with its envelope. Compact is one line (for streams).
std::string dumpDocument(const nlohmann::json& doc, bool compact);

/// A set of documents read from one place (a file or stdin), in order.
class DocumentSet {
public:
  /// Reads `path` ("-" = stdin). A file may hold one document or a stream of them.
  static DocumentSet read(const std::string& path);
  static DocumentSet fromText(std::string_view text, const std::string& name);

  const std::string& name() const { return name_; }
  const std::vector<nlohmann::json>& documents() const { return docs_; }
  /// The last document of a kind; throws InputError if there is none.
  const nlohmann::json& require(DocKind kind) const;
  /// The last document of a kind, or nullptr.
  const nlohmann::json* find(DocKind kind) const;

private:
  std::string name_;
  std::vector<nlohmann::json> docs_;
};

/// Writes a tool's own document (docs/usage.md, "Pipes, exit codes, errors"):
///  - output is a path: the document alone, indented, written atomically;
///  - output is "-": the document alone on stdout, one line;
///  - output is "": stream mode: `passthrough` documents, then the document, one per line.
void emitDocument(const std::string& output, const std::vector<nlohmann::json>& passthrough,
                  const nlohmann::json& doc);

Profile loadProfile(const std::string& path);
Cost loadCost(const std::string& path);
Schedule loadSchedule(const std::string& path);

} // namespace xalloc::formats
