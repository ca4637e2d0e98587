// JSON in and out of the planner.
#include "xalloc/memplan/plan_io.h"

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "xalloc/best_fit.h"
#include "xalloc/formats/json_reader.h"

namespace xalloc::memplan {

std::vector<TensorSpec> readTensors(const formats::JsonReader& r) {
  std::vector<TensorSpec> ts;
  std::map<std::string, std::string> seen; // id -> pointer of its first use
  r.at("tensors").forEach([&](const formats::JsonReader& e) {
    TensorSpec t;
    auto id = e.at("id");
    if (id.json().is_string())
      t.id = id.toString();
    else
      t.id = std::to_string(id.toInt());
    if (!seen.emplace(t.id, e.pointer()).second)
      id.fail("duplicate tensor id '" + t.id + "' (first at " + seen[t.id] + ")");
    t.size = e.at("size").toCount();
    t.first_op = e.at("first_op").toCount();
    t.last_op = e.at("last_op").toCount();
    if (t.last_op < t.first_op)
      e.at("last_op").fail("last_op " + std::to_string(t.last_op) + " is before first_op " +
                           std::to_string(t.first_op));
    t.alignment = e.find("alignment") ? e.at("alignment").toCount() : 0;
    if (auto off = e.find("offset"))
      t.fixed_offset = off->toCount();
    ts.push_back(std::move(t));
  });
  return ts;
}

std::vector<TensorSpec> tensorsFromProfile(const formats::Profile& p) {
  std::map<std::int64_t, TensorSpec> by_storage;
  for (const auto& r : p.records) {
    if (r.origin == formats::Origin::Attribute || r.storage_bytes == 0)
      continue;
    auto [it, fresh] = by_storage.try_emplace(r.storage_id);
    TensorSpec& t = it->second;
    if (fresh) {
      t.id = "s" + std::to_string(r.storage_id);
      t.size = r.storage_bytes;
      t.first_op = r.first_use;
      t.last_op = r.last_use;
    } else {
      t.first_op = std::min(t.first_op, r.first_use);
      t.last_op = std::max(t.last_op, r.last_use);
    }
  }
  std::vector<TensorSpec> ts;
  ts.reserve(by_storage.size());
  for (auto& [id, t] : by_storage)
    ts.push_back(std::move(t));
  return ts;
}

nlohmann::json planToJson(const std::vector<TensorSpec>& ts, const Plan& plan,
                          const PlanOptions& o) {
  nlohmann::json offsets = nlohmann::json::object();
  for (std::size_t i = 0; i < ts.size(); ++i)
    offsets[ts[i].id] = plan.offsets[i];
  nlohmann::json tried = nlohmann::json::object();
  for (const auto& [name, bytes] : plan.tried)
    tried[name] = bytes;
  std::int64_t no_reuse = 0;
  for (const auto& t : ts)
    no_reuse += alignUp(t.size, t.alignment > 0 ? t.alignment : o.alignment);
  return {{"offsets", offsets},
          {"workspace_bytes", plan.workspace_bytes},
          {"lower_bound_bytes", plan.lower_bound_bytes},
          {"ratio", std::round(plan.ratio() * 1e6) / 1e6},
          {"no_reuse_bytes", no_reuse},
          {"heuristic", plan.heuristic},
          {"heuristics", tried},
          {"alignment", o.alignment},
          {"tensors", ts.size()}};
}

} // namespace xalloc::memplan
