// cost.json <-> Cost.
#include "xalloc/formats/cost.h"

#include <nlohmann/json.hpp>

#include "xalloc/formats/json_reader.h"

namespace xalloc::formats {

using nlohmann::json;

std::string dtypeGroup(const std::string& dtype) {
  std::int64_t size = dtypeSize(dtype);
  return size > 0 ? std::to_string(size) + "-byte" : "unknown";
}

namespace {

json toJson(const FitQuality& q) {
  return json{{"folds", q.folds},
              {"samples", q.samples},
              {"mape", q.mape},
              {"median_ape", q.median_ape},
              {"max_ape", q.max_ape}};
}

FitQuality readFitQuality(const JsonReader& r) {
  FitQuality q;
  q.folds = r.at("folds").toCount();
  q.samples = r.at("samples").toCount();
  q.mape = r.at("mape").toNonNegative();
  q.median_ape = r.at("median_ape").toNonNegative();
  q.max_ape = r.at("max_ape").toNonNegative();
  return q;
}

json toJson(const CostModelEntry& e) {
  json j{{"device", e.device},
         {"dtype_group", e.dtype_group},
         {"alpha", e.alpha},
         {"beta", e.beta},
         {"gamma", e.gamma},
         {"n_samples", e.n_samples},
         {"r2", e.r2},
         {"fit", e.fit},
         {"floor_gbps", e.floor_gbps},
         {"formula", "cost_ms = alpha * numel + beta * ndim + gamma"}};
  j["holdout"] = e.holdout ? toJson(*e.holdout) : json(nullptr);
  return j;
}

CostModelEntry readCostModelEntry(const JsonReader& r) {
  CostModelEntry e;
  e.device = r.getString("device");
  e.dtype_group = r.getString("dtype_group");
  e.alpha = r.getNumber("alpha");
  e.beta = r.getNumber("beta");
  e.gamma = r.getNumber("gamma");
  e.n_samples = r.at("n_samples").toCount();
  e.r2 = r.getNumber("r2", 0);
  e.fit = r.getString("fit", "least_squares");
  e.floor_gbps = r.getNonNegative("floor_gbps", 0);
  if (auto h = r.find("holdout"))
    e.holdout = readFitQuality(*h);
  return e;
}

} // namespace

json toJson(const Cost& c) {
  json j;
  j["schema"] = kCostSchema;
  j["schema_version"] = kCostVersion;
  j["tool"] = {{"name", "xcost"}, {"version", c.tool_version}};
  j["model"] = toJson(c.model);
  j["conversion_cost_table"] = json::array();
  for (const auto& e : c.conversion_cost_table)
    j["conversion_cost_table"].push_back(toJson(e));
  j["cost_model"] = json::array();
  for (const auto& e : c.cost_model)
    j["cost_model"].push_back(toJson(e));
  return j;
}

Cost readCost(const JsonReader& r) {
  Cost c;
  if (auto t = r.find("tool"))
    c.tool_version = t->getString("version", "");
  c.model = readModelInfo(r.at("model"));
  r.at("conversion_cost_table").forEach([&](const JsonReader& e) {
    c.conversion_cost_table.push_back(readConversionCost(e));
  });
  r.at("cost_model").forEach([&](const JsonReader& e) {
    c.cost_model.push_back(readCostModelEntry(e));
  });
  return c;
}

} // namespace xalloc::formats
