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
  json j{{"folds", q.folds},
         {"samples", q.samples},
         {"mape", q.mape},
         {"median_ape", q.median_ape},
         {"max_ape", q.max_ape}};
  if (q.kendall_tau)
    j["kendall_tau"] = *q.kendall_tau;
  if (!q.by_size.empty()) {
    json bands = json::array();
    for (const auto& b : q.by_size) {
      json band{{"from_bytes", b.from_bytes}, {"samples", b.samples}, {"mape", b.mape}};
      if (b.to_bytes)
        band["to_bytes"] = *b.to_bytes;
      bands.push_back(std::move(band));
    }
    j["by_size"] = std::move(bands);
  }
  return j;
}

json optionalQuality(const std::optional<FitQuality>& q) {
  return q ? toJson(*q) : json(nullptr);
}

FitQuality readFitQuality(const JsonReader& r) {
  FitQuality q;
  q.folds = r.at("folds").toCount();
  q.samples = r.at("samples").toCount();
  q.mape = r.at("mape").toNonNegative();
  q.median_ape = r.at("median_ape").toNonNegative();
  q.max_ape = r.at("max_ape").toNonNegative();
  if (auto t = r.find("kendall_tau"); t && !t->isNull())
    q.kendall_tau = t->toNumber();
  if (auto bands = r.find("by_size"))
    bands->forEach([&](const JsonReader& b) {
      SizeBandError e;
      e.from_bytes = b.at("from_bytes").toCount();
      if (auto to = b.find("to_bytes"))
        e.to_bytes = to->toCount();
      e.samples = b.at("samples").toCount();
      e.mape = b.at("mape").toNonNegative();
      q.by_size.push_back(e);
    });
  return q;
}

std::optional<FitQuality> readOptionalQuality(const JsonReader& r, const char* key) {
  if (auto q = r.find(key); q && !q->isNull())
    return readFitQuality(*q);
  return std::nullopt;
}

json toJson(const StrideModel& m) {
  json paths = json::array();
  for (const auto& p : m.paths)
    paths.push_back(
        {{"path", p.path}, {"coefficients", p.coefficients}, {"n_samples", p.n_samples}});
  return json{{"device", m.device},
              {"caches", toJson(m.caches)},
              {"floor_gbps", m.floor_gbps},
              {"features", m.features},
              {"paths", paths},
              {"holdout", optionalQuality(m.holdout)},
              {"classic_holdout", optionalQuality(m.classic_holdout)},
              {"test", optionalQuality(m.test)},
              {"classic_test", optionalQuality(m.classic_test)},
              {"formula", "cost_ms = max(sum_k c[path][k] * feature_k(layout), bytes / floor)"}};
}

StrideModel readStrideModel(const JsonReader& r) {
  StrideModel m;
  m.device = r.getString("device");
  auto c = r.at("caches");
  m.caches.l1d_bytes = c.at("l1d_bytes").toCount();
  m.caches.l2_bytes = c.at("l2_bytes").toCount();
  m.caches.l3_bytes = c.at("l3_bytes").toCount();
  m.floor_gbps = r.getNonNegative("floor_gbps", 0);
  r.at("features").forEach([&](const JsonReader& f) { m.features.push_back(f.toString()); });
  r.at("paths").forEach([&](const JsonReader& p) {
    StridePath sp;
    sp.path = p.getString("path");
    p.at("coefficients").forEach([&](const JsonReader& x) {
      sp.coefficients.push_back(x.toNonNegative());
    });
    if (sp.coefficients.size() != m.features.size())
      p.at("coefficients")
          .fail("expected " + std::to_string(m.features.size()) +
                " coefficients, one per feature, got " + std::to_string(sp.coefficients.size()));
    sp.n_samples = p.at("n_samples").toCount();
    m.paths.push_back(std::move(sp));
  });
  m.holdout = readOptionalQuality(r, "holdout");
  m.classic_holdout = readOptionalQuality(r, "classic_holdout");
  m.test = readOptionalQuality(r, "test");
  m.classic_test = readOptionalQuality(r, "classic_test");
  return m;
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
  if (e.target != LayoutTarget::Contiguous)
    j["target"] = toString(e.target);
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
  if (auto t = r.find("target"))
    e.target = t->toEnum<LayoutTarget>();
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
  j["stride_model"] = json::array();
  for (const auto& m : c.stride_model)
    j["stride_model"].push_back(toJson(m));
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
  if (auto s = r.find("stride_model"))
    s->forEach([&](const JsonReader& e) { c.stride_model.push_back(readStrideModel(e)); });
  return c;
}

} // namespace xalloc::formats
