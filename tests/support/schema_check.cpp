// SchemaSet: formats/schema/*.schema.json parsed by valijson (draft 7 rules; the schemas use
// no keyword that draft 2020-12 changed), references between the files resolved from `dir`.
#include "schema_check.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

namespace xalloc::testing {

namespace {
nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read schema " + path);
  return nlohmann::json::parse(in);
}
} // namespace

struct SchemaSet::Impl {
  std::string dir;
  std::map<std::string, std::unique_ptr<valijson::Schema>> by_name; // "xalloc.profile" -> schema
};

SchemaSet::SchemaSet(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  impl_->dir = dir;
  // "https://x-allocator.dev/schema/common.schema.json" -> dir/common.schema.json
  auto fetch = [dir](const std::string& uri) -> const nlohmann::json* {
    const std::string file = uri.substr(uri.rfind('/') + 1);
    return new nlohmann::json(readJson(dir + "/" + file));
  };
  auto release = [](const nlohmann::json* doc) {
    delete doc;
  };
  for (const char* kind : {"profile", "cost", "schedule"}) {
    const nlohmann::json doc = readJson(dir + "/" + kind + ".schema.json");
    auto schema = std::make_unique<valijson::Schema>();
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    parser.populateSchema(adapter, *schema, fetch, release);
    impl_->by_name[std::string("xalloc.") + kind] = std::move(schema);
  }
}

SchemaSet::~SchemaSet() = default;

std::vector<std::string> SchemaSet::errors(const nlohmann::json& doc) const {
  const auto it = doc.is_object() && doc.contains("schema") && doc["schema"].is_string()
                      ? impl_->by_name.find(doc["schema"].get<std::string>())
                      : impl_->by_name.end();
  if (it == impl_->by_name.end())
    return {"/schema: not one of xalloc.profile, xalloc.cost, xalloc.schedule"};
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(doc);
  std::vector<std::string> out;
  if (validator.validate(*it->second, target, &results))
    return out;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) {
    std::string where;
    for (const auto& c : e.context)
      if (c != "<root>")
        where += c.size() > 2 && c.front() == '[' ? "/" + c.substr(1, c.size() - 2) : "/" + c;
    out.push_back((where.empty() ? "/" : where) + ": " + e.description);
  }
  return out;
}

} // namespace xalloc::testing
