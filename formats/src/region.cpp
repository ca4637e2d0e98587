// Regions and their candidates <-> JSON.
#include "xalloc/formats/region.h"

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"

namespace xalloc::formats {

using nlohmann::json;

const LayoutTraits& RegionCandidate::traits() const {
  const LayoutTraits* t = layoutTraits(target, packed);
  XALLOC_EXPECTS(t, "a region candidate is a layout of layout_traits.cpp");
  return *t;
}

bool RegionCandidate::needsRuntime() const {
  return traits().needs_runtime;
}

std::string RegionCandidate::name() const {
  return traits().name;
}

std::optional<RegionCandidate> parseCandidateName(const std::string& name) {
  const LayoutTraits* t = layoutTraits(name);
  if (!t)
    return std::nullopt;
  RegionCandidate c;
  c.target = t->target;
  c.packed = t->packed;
  return c;
}

json toJson(const RegionCandidate& c) {
  json j{{"target", toString(c.target)}, {"packed", c.packed}, {"measured", c.measured}};
  if (c.measured) {
    j["time_ms"] = roundMs(c.time_ms);
    j["spread_ms"] = roundMs(c.spread_ms);
    j["identical_output"] = c.identical_output;
    if (!c.identical_output && c.output_error)
      j["output_error"] = *c.output_error;
  }
  if (c.delta_ms)
    j["delta_ms"] = roundMs(*c.delta_ms);
  if (c.delta_spread_ms)
    j["delta_spread_ms"] = roundMs(*c.delta_spread_ms);
  if (!c.note.empty())
    j["note"] = c.note;
  return j;
}

RegionCandidate readRegionCandidate(const JsonReader& r) {
  RegionCandidate c;
  c.target = r.at("target").toEnum<LayoutTarget>();
  c.packed = r.getBool("packed", false);
  if (!layoutTraits(c.target, c.packed))
    r.at("packed").fail("no region layout is " + std::string(toString(c.target)) +
                        (c.packed ? " with packed weights" : " without packed weights"));
  c.measured = r.getBool("measured", false);
  if (c.measured) {
    c.time_ms = r.at("time_ms").toNonNegative();
    c.spread_ms = r.getNonNegative("spread_ms", 0);
  }
  c.delta_ms = r.getOptionalNumber("delta_ms");
  if (auto f = r.find("delta_spread_ms"))
    c.delta_spread_ms = f->toNonNegative();
  c.identical_output = r.getBool("identical_output", true);
  if (auto f = r.find("output_error"))
    c.output_error = f->toNonNegative();
  c.note = r.getString("note", "");
  return c;
}

json toJson(const RegionRef& r) {
  json nodes = json::array();
  for (const auto& a : r.nodes)
    nodes.push_back(toJson(a));
  return {{"id", r.id}, {"nodes", std::move(nodes)}, {"convolutions", r.convolutions}};
}

RegionRef readRegionRef(const JsonReader& r) {
  RegionRef ref;
  ref.id = r.at("id").toCount();
  r.at("nodes").forEach([&](const JsonReader& a) { ref.nodes.push_back(readAnchor(a)); });
  if (ref.nodes.empty())
    r.at("nodes").fail("a region has at least one op");
  ref.convolutions = r.at("convolutions").toCount();
  return ref;
}

json toJson(const Region& r) {
  json j = toJson(r.ref);
  json entries = json::array(), exits = json::array(), candidates = json::array();
  for (const auto& l : r.entries)
    entries.push_back(toJson(l));
  for (const auto& l : r.exits)
    exits.push_back(toJson(l));
  for (const auto& c : r.candidates)
    candidates.push_back(toJson(c));
  j["entries"] = std::move(entries);
  j["exits"] = std::move(exits);
  j["candidates"] = std::move(candidates);
  if (!r.note.empty())
    j["note"] = r.note;
  return j;
}

Region readRegion(const JsonReader& r) {
  Region g;
  g.ref = readRegionRef(r);
  r.at("entries").forEach([&](const JsonReader& e) { g.entries.push_back(readLayout(e)); });
  r.at("exits").forEach([&](const JsonReader& e) { g.exits.push_back(readLayout(e)); });
  r.at("candidates").forEach([&](const JsonReader& e) {
    g.candidates.push_back(readRegionCandidate(e));
  });
  if (g.candidates.empty() || g.candidates[0].target != LayoutTarget::Contiguous ||
      g.candidates[0].packed)
    r.at("candidates").fail("the first candidate is the region as it is ('contiguous')");
  g.note = r.getString("note", "");
  return g;
}

} // namespace xalloc::formats
