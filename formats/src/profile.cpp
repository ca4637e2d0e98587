// profile.json <-> Profile.
#include "xalloc/formats/profile.h"

#include <cmath>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "xalloc/formats/json_reader.h"

namespace xalloc::formats {

using nlohmann::json;

const Op* Profile::findOp(std::int64_t id) const {
  return formats::findOp(ops, id);
}

const Record* Profile::findRecord(std::int64_t id) const {
  for (const auto& r : records)
    if (r.id == id)
      return &r;
  return nullptr;
}

namespace {

void putOptionalMs(json& j, const char* key, const std::optional<double>& v) {
  if (v)
    j[key] = roundMs(*v);
}

json toJson(const ConsumerTiming& c) {
  json j{{"op_id", c.op_id},
         {"input_index", c.input_index},
         {"measured", c.measured},
         {"accepts_noncontiguous", c.accepts_noncontiguous}};
  if (c.measured) {
    j["time_as_is_ms"] = roundMs(c.time_as_is_ms);
    j["time_as_is_spread_ms"] = roundMs(c.time_as_is_spread_ms);
    j["identical_output"] = c.identical_output;
    j["same_output_layout"] = c.same_output_layout;
    if (!c.identical_output && c.output_error)
      j["output_error"] = *c.output_error;
  }
  putOptionalMs(j, "time_contiguous_ms", c.time_contiguous_ms);
  putOptionalMs(j, "time_contiguous_spread_ms", c.time_contiguous_spread_ms);
  putOptionalMs(j, "time_noncontiguous_ms", c.time_noncontiguous_ms);
  putOptionalMs(j, "time_noncontiguous_spread_ms", c.time_noncontiguous_spread_ms);
  if (c.delta_ms)
    j["delta_ms"] = roundMs(*c.delta_ms);
  putOptionalMs(j, "delta_spread_ms", c.delta_spread_ms);
  if (c.reads)
    j["reads"] = *c.reads;
  if (c.noisy)
    j["noisy"] = true;
  if (!c.note.empty())
    j["note"] = c.note;
  if (!c.downstream.empty()) {
    json d = json::array();
    for (const ConsumerTiming& e : c.downstream)
      d.push_back(toJson(e));
    j["downstream"] = std::move(d);
  }
  return j;
}

std::optional<double> optionalMs(const JsonReader& r, const char* key) {
  if (auto f = r.find(key))
    return f->toNonNegative();
  return std::nullopt;
}

// How deep `downstream` may nest: xprof follows a few levels; a document deeper than this was
// not written by it.
constexpr int kMaxDownstreamDepth = 8;

ConsumerTiming readConsumer(const JsonReader& r, int depth = 0) {
  ConsumerTiming c;
  c.op_id = r.at("op_id").toCount();
  c.input_index = r.at("input_index").toCount();
  c.measured = r.getBool("measured", false);
  if (c.measured) {
    c.time_as_is_ms = r.at("time_as_is_ms").toNonNegative();
    c.time_as_is_spread_ms = optionalMs(r, "time_as_is_spread_ms").value_or(0);
  }
  c.time_contiguous_ms = optionalMs(r, "time_contiguous_ms");
  c.time_contiguous_spread_ms = optionalMs(r, "time_contiguous_spread_ms");
  c.time_noncontiguous_ms = optionalMs(r, "time_noncontiguous_ms");
  c.time_noncontiguous_spread_ms = optionalMs(r, "time_noncontiguous_spread_ms");
  c.delta_ms = r.getOptionalNumber("delta_ms");
  c.delta_spread_ms = optionalMs(r, "delta_spread_ms");
  c.identical_output = r.getBool("identical_output", true);
  if (auto f = r.find("output_error"))
    c.output_error = f->toNonNegative();
  c.same_output_layout = r.getBool("same_output_layout", true);
  c.accepts_noncontiguous = r.getBool("accepts_noncontiguous", true);
  if (auto f = r.find("reads"))
    c.reads = f->toCount();
  c.noisy = r.getBool("noisy", false);
  c.note = r.getString("note", "");
  if (auto f = r.find("downstream")) {
    if (depth >= kMaxDownstreamDepth)
      f->fail("downstream consumers nested more than " + std::to_string(kMaxDownstreamDepth) +
              " levels deep");
    f->forEach([&](const JsonReader& e) { c.downstream.push_back(readConsumer(e, depth + 1)); });
  }
  return c;
}

json toJson(const Record& rec) {
  json j = json::object();
  putLayout(j, rec.layout);
  j["id"] = rec.id;
  j["name"] = rec.name;
  j["producer_op"] = rec.producer_op ? json(*rec.producer_op) : json(nullptr);
  j["output_index"] = rec.output_index;
  j["origin"] = toString(rec.origin);
  j["contiguous"] = rec.contiguous;
  j["bytes"] = rec.bytes;
  j["storage_id"] = rec.storage_id;
  j["storage_bytes"] = rec.storage_bytes;
  j["first_use"] = rec.first_use;
  j["last_use"] = rec.last_use;
  j["is_output"] = rec.is_output;
  j["in_loop"] = rec.in_loop;
  if (rec.runs_by_bytes)
    j["runs_by_bytes"] = std::round(*rec.runs_by_bytes * 1e6) / 1e6;
  j["has_writers"] = rec.has_writers;
  j["module_storage"] = rec.module_storage;
  j["view_chain"] = rec.view_chain;
  json consumers = json::array();
  for (const auto& c : rec.consumers)
    consumers.push_back(toJson(c));
  j["consumers"] = std::move(consumers);
  if (const auto& f = rec.producer_fusion) {
    json pf = {{"op", f->op},
               {"template_input", f->template_input},
               {"separate_ms", f->separate_ms},
               {"separate_spread_ms", f->separate_spread_ms},
               {"fused_ms", f->fused_ms},
               {"fused_spread_ms", f->fused_spread_ms},
               {"delta_ms", f->delta_ms},
               {"delta_spread_ms", f->delta_spread_ms},
               {"identical_output", f->identical_output}};
    if (f->output_error)
      pf["output_error"] = *f->output_error;
    j["producer_fusion"] = std::move(pf);
  }
  return j;
}

Record readRecord(const JsonReader& r) {
  Record rec;
  rec.id = r.at("id").toCount();
  rec.name = r.getString("name", "");
  rec.producer_op = r.getOptionalInt("producer_op");
  if (auto i = r.find("output_index"))
    rec.output_index = i->toCount();
  if (auto o = r.find("origin"))
    rec.origin = o->toEnum<Origin>();
  rec.layout = readLayout(r);
  rec.contiguous = r.getBool("contiguous");
  rec.bytes = r.at("bytes").toCount();
  rec.storage_id = r.at("storage_id").toCount();
  rec.storage_bytes = r.at("storage_bytes").toCount();
  rec.first_use = r.at("first_use").toCount();
  rec.last_use = r.at("last_use").toCount();
  if (rec.last_use < rec.first_use)
    r.at("last_use")
        .fail("last_use " + std::to_string(rec.last_use) + " is before first_use " +
              std::to_string(rec.first_use));
  rec.is_output = r.getBool("is_output", false);
  rec.in_loop = r.getBool("in_loop", false);
  if (auto f = r.find("runs_by_bytes"))
    rec.runs_by_bytes = f->toNonNegative();
  rec.has_writers = r.getBool("has_writers", false);
  rec.module_storage = r.getBool("module_storage", false);
  if (auto v = r.find("view_chain"))
    rec.view_chain = v->toStringVector();
  r.at("consumers").forEach([&](const JsonReader& c) { rec.consumers.push_back(readConsumer(c)); });
  if (auto f = r.find("producer_fusion")) {
    ProducerFusion pf;
    pf.op = f->getString("op");
    pf.template_input = f->at("template_input").toCount();
    pf.separate_ms = f->at("separate_ms").toNonNegative();
    pf.separate_spread_ms = f->at("separate_spread_ms").toNonNegative();
    pf.fused_ms = f->at("fused_ms").toNonNegative();
    pf.fused_spread_ms = f->at("fused_spread_ms").toNonNegative();
    pf.delta_ms = f->getNumber("delta_ms");
    pf.delta_spread_ms = f->at("delta_spread_ms").toNonNegative();
    pf.identical_output = f->getBool("identical_output", true);
    if (auto e = f->find("output_error"))
      pf.output_error = e->toNonNegative();
    rec.producer_fusion = std::move(pf);
  }
  return rec;
}

} // namespace

json toJson(const Profile& p) {
  json j;
  j["schema"] = kProfileSchema;
  j["schema_version"] = kProfileVersion;
  j["tool"] = {{"name", "xprof"}, {"version", p.tool_version}};
  j["model"] = toJson(p.model);
  j["device"] = toJson(p.device);
  json inputs = json::array();
  for (const auto& in : p.settings.inputs)
    inputs.push_back(toJson(in));
  j["settings"] = {{"iterations", p.settings.iterations},
                   {"warmup", p.settings.warmup},
                   {"repeats", p.settings.repeats},
                   {"seed", p.settings.seed},
                   {"inputs", inputs},
                   {"input_file", p.settings.input_file},
                   {"sweep", p.settings.sweep},
                   {"timing_db", p.settings.timing_db},
                   {"db_hits", p.settings.db_hits},
                   {"db_misses", p.settings.db_misses},
                   {"reused_profile", p.settings.reused_profile}};
  if (p.settings.program_run_ms > 0)
    j["settings"]["program_run_ms"] = p.settings.program_run_ms;
  if (p.settings.model_run_ms > 0)
    j["settings"]["model_run_ms"] = p.settings.model_run_ms;
  j["ops"] = json::array();
  for (const auto& op : p.ops)
    j["ops"].push_back(toJson(op));
  j["records"] = json::array();
  for (const auto& r : p.records)
    j["records"].push_back(toJson(r));
  j["conversion_cost_table"] = json::array();
  for (const auto& c : p.conversion_cost_table)
    j["conversion_cost_table"].push_back(toJson(c));
  j["gpu_idle_events"] = json::array();
  for (const auto& e : p.gpu_idle_events)
    j["gpu_idle_events"].push_back(toJson(e));
  j["regions"] = json::array();
  for (const auto& g : p.regions)
    j["regions"].push_back(toJson(g));
  if (!p.regions_note.empty())
    j["regions_note"] = p.regions_note;
  return j;
}

Profile readProfile(const JsonReader& r) {
  Profile p;
  if (auto t = r.find("tool"))
    p.tool_version = t->getString("version", "");
  p.model = readModelInfo(r.at("model"));
  p.device = readDeviceInfo(r.at("device"));
  if (auto s = r.find("settings")) {
    p.settings.iterations = s->getInt("iterations", 0);
    p.settings.warmup = s->getInt("warmup", 0);
    p.settings.repeats = s->getInt("repeats", 0);
    p.settings.seed = s->getInt("seed", 0);
    if (auto in = s->find("inputs"))
      in->forEach([&](const JsonReader& e) { p.settings.inputs.push_back(readInputSpec(e)); });
    p.settings.input_file = s->getString("input_file", "");
    p.settings.sweep = s->getBool("sweep", false);
    p.settings.timing_db = s->getString("timing_db", "");
    p.settings.db_hits = s->getInt("db_hits", 0);
    p.settings.db_misses = s->getInt("db_misses", 0);
    p.settings.reused_profile = s->getBool("reused_profile", false);
    p.settings.program_run_ms = s->getNonNegative("program_run_ms", 0);
    p.settings.model_run_ms = s->getNonNegative("model_run_ms", 0);
  }
  std::set<std::int64_t> op_ids;
  r.at("ops").forEach([&](const JsonReader& e) {
    p.ops.push_back(readOp(e));
    if (!op_ids.insert(p.ops.back().id).second)
      e.at("id").fail("duplicate op id " + std::to_string(p.ops.back().id));
  });
  std::set<std::int64_t> record_ids;
  auto records = r.at("records");
  records.forEach([&](const JsonReader& e) {
    p.records.push_back(readRecord(e));
    const Record& rec = p.records.back();
    if (!record_ids.insert(rec.id).second)
      e.at("id").fail("duplicate record id " + std::to_string(rec.id));
    if (rec.producer_op && !op_ids.count(*rec.producer_op))
      e.at("producer_op").fail("unknown op id " + std::to_string(*rec.producer_op));
    // Every consumer's op, and those of the consumers it was followed to, exists.
    std::function<void(const ConsumerTiming&, const JsonReader&)> check =
        [&](const ConsumerTiming& c, const JsonReader& at) {
          if (!op_ids.count(c.op_id))
            at.at("op_id").fail("unknown op id " + std::to_string(c.op_id));
          for (std::size_t k = 0; k < c.downstream.size(); ++k)
            check(c.downstream[k], at.at("downstream").at(k));
        };
    for (std::size_t i = 0; i < rec.consumers.size(); ++i)
      check(rec.consumers[i], e.at("consumers").at(i));
  });
  // An op's inputs and outputs are records of this profile.
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    for (const char* key : {"inputs", "outputs"}) {
      const auto& ids = std::string(key) == "inputs" ? op.inputs : op.outputs;
      for (std::size_t k = 0; k < ids.size(); ++k)
        if (!record_ids.count(ids[k]))
          r.at("ops").at(i).at(key).at(k).fail("unknown record id " + std::to_string(ids[k]));
    }
  }
  r.at("conversion_cost_table").forEach([&](const JsonReader& e) {
    p.conversion_cost_table.push_back(readConversionCost(e));
  });
  r.at("gpu_idle_events").forEach([&](const JsonReader& e) {
    p.gpu_idle_events.push_back(readIdleEvent(e));
    const auto& ev = p.gpu_idle_events.back();
    if (!op_ids.count(ev.before_op_id))
      e.at("before_op_id").fail("unknown op id " + std::to_string(ev.before_op_id));
    if (!op_ids.count(ev.after_op_id))
      e.at("after_op_id").fail("unknown op id " + std::to_string(ev.after_op_id));
  });
  if (auto g = r.find("regions")) {
    std::set<std::int64_t> region_ids;
    g->forEach([&](const JsonReader& e) {
      p.regions.push_back(readRegion(e));
      if (!region_ids.insert(p.regions.back().ref.id).second)
        e.at("id").fail("duplicate region id " + std::to_string(p.regions.back().ref.id));
    });
  }
  p.regions_note = r.getString("regions_note", "");
  return p;
}

} // namespace xalloc::formats
