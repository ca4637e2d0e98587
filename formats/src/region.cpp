// Regions and their candidates <-> JSON.
#include "xalloc/formats/region.h"

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"

namespace xalloc::formats {

using nlohmann::json;

RegionCandidate candidateOf(const LayoutTraits& traits) {
  RegionCandidate c;
  c.layout = &traits;
  return c;
}

std::optional<RegionCandidate> parseCandidateName(const std::string& name) {
  const LayoutTraits* t = layoutTraits(name);
  if (!t)
    return std::nullopt;
  return candidateOf(*t);
}

const LayoutTraits& readRegionLayout(const JsonReader& r, const char* name_key) {
  if (auto n = r.find(name_key)) {
    std::string name = n->toString();
    const LayoutTraits* t = layoutTraits(name);
    if (!t)
      n->fail("no region layout is named '" + name + "' (the layouts: " + regionLayoutNames() +
              ")");
    return *t;
  }
  // Profile version 1, schedule version 2: a layout was its activations' memory format and
  // whether its weights were packed.
  LayoutTarget target = r.at("target").toEnum<LayoutTarget>();
  bool packed = r.getBool("packed", false);
  const LayoutTraits* t = layoutTraits(target, packed);
  if (!t)
    (r.find("packed") ? r.at("packed") : r.at("target"))
        .fail("no region layout is " + std::string(toString(target)) +
              (packed ? " with packed weights" : " without packed weights"));
  return *t;
}

json toJson(const RegionCandidate& c) {
  json j{{"layout", c.name()}, {"measured", c.measured}};
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
  if (c.rounds && c.faster_rounds) {
    j["rounds"] = *c.rounds;
    j["faster_rounds"] = *c.faster_rounds;
  }
  if (!c.note.empty())
    j["note"] = c.note;
  return j;
}

RegionCandidate readRegionCandidate(const JsonReader& r) {
  RegionCandidate c = candidateOf(readRegionLayout(r, "layout"));
  c.measured = r.getBool("measured", false);
  if (c.measured) {
    c.time_ms = r.at("time_ms").toNonNegative();
    c.spread_ms = r.getNonNegative("spread_ms", 0);
  }
  c.delta_ms = r.getOptionalNumber("delta_ms");
  if (auto f = r.find("delta_spread_ms"))
    c.delta_spread_ms = f->toNonNegative();
  if (auto f = r.find("rounds")) {
    c.rounds = f->toCount();
    c.faster_rounds = r.at("faster_rounds").toCount();
    if (*c.faster_rounds > *c.rounds)
      r.at("faster_rounds").fail("more than its " + std::to_string(*c.rounds) + " rounds");
  }
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
  if (!r.feeds.empty()) {
    json feeds = json::array();
    for (const auto& f : r.feeds)
      feeds.push_back({{"exit", f.exit}, {"region", f.region}});
    j["feeds"] = std::move(feeds);
  }
  if (r.rounding_error)
    j["rounding_error"] = *r.rounding_error;
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
  if (g.candidates.empty() || !g.candidates[0].asIs())
    r.at("candidates")
        .fail(std::string("the first candidate is the region as it is ('") +
              regionLayoutTraits().front().name + "')");
  if (auto feeds = r.find("feeds"))
    feeds->forEach([&](const JsonReader& f) {
      RegionFeed feed;
      feed.exit = f.at("exit").toCount();
      feed.region = f.at("region").toCount();
      if (feed.exit >= static_cast<std::int64_t>(g.exits.size()))
        f.at("exit").fail("the region has " + std::to_string(g.exits.size()) + " exit(s)");
      g.feeds.push_back(feed);
    });
  g.rounding_error = r.getOptionalNumber("rounding_error");
  if (g.rounding_error && !(*g.rounding_error >= 0))
    r.at("rounding_error").fail("expected a number >= 0");
  g.note = r.getString("note", "");
  return g;
}

} // namespace xalloc::formats
