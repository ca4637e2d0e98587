// The documents' JSON Schemas (formats/schema/) through valijson, for the tests: every document
// the tools write is validated with it (xalloc-validate in the command-line tests), and the
// schema-parity test holds the C++ readers and the schemas to the same verdicts.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xalloc::testing {

class SchemaSet {
public:
  /// Loads xalloc.profile, xalloc.cost and xalloc.schedule from `dir` (formats/schema).
  explicit SchemaSet(const std::string& dir);
  ~SchemaSet();
  SchemaSet(const SchemaSet&) = delete;
  SchemaSet& operator=(const SchemaSet&) = delete;

  /// What is wrong with `doc` by the schema its "schema" field names, one line each
  /// ("/records/3/sizes: ..."); empty when it is valid. A document with no known schema field is
  /// one error.
  std::vector<std::string> errors(const nlohmann::json& doc) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace xalloc::testing
