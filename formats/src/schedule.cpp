// schedule.json <-> Schedule.
#include "xalloc/formats/schedule.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/formats/layout_traits.h"

namespace xalloc::formats {

bool withinTolerance(bool identical_output, const std::optional<double>& output_error,
                     double tolerance) {
  if (identical_output)
    return true;
  return tolerance > 0 && output_error && *output_error <= tolerance;
}

double noiseBound(double tolerance, const std::optional<double>& reference) {
  if (tolerance <= 0 || !reference || !std::isfinite(*reference))
    return tolerance;
  return std::max(tolerance, 2 * *reference);
}

void checkToleranceFlags(const std::optional<double>& tolerance, bool exact,
                         const std::string& tool) {
  if (exact && tolerance)
    throw InputError(tool, "--exact and --tolerance exclude each other");
  if (tolerance && !(std::isfinite(*tolerance) && *tolerance > 0 && *tolerance <= kMaxTolerance)) {
    char given[32], most[32];
    std::snprintf(given, sizeof given, "%g", *tolerance);
    std::snprintf(most, sizeof most, "%g", kMaxTolerance);
    throw InputError(tool, std::string("--tolerance must be a number above 0 and at most ") + most +
                               " (--exact for bit-identical outputs), not " + given);
  }
}

using nlohmann::json;

const char* actionName(Action a) {
  switch (a) {
  case Action::None:
    return "none";
  case Action::Sync:
    return "sync";
  case Action::Async:
    return "async";
  case Action::Remove:
    return "remove";
  }
  return "none";
}

std::optional<Action> parseAction(const std::string& s) {
  for (Action a : {Action::None, Action::Sync, Action::Async, Action::Remove})
    if (s == actionName(a))
      return a;
  return std::nullopt;
}

bool sameExpression(const Decision& a, const Decision& b) {
  return a.output_index == b.output_index && a.anchor.sameSite(b.anchor) &&
         a.anchor.line == b.anchor.line && a.anchor.col == b.anchor.col;
}

std::int64_t Schedule::count(Action a) const {
  std::int64_t n = 0;
  for (const auto& d : decisions)
    n += d.action == a;
  return n;
}

void setValue(NamedValues& values, const std::string& name, std::variant<double, std::string> v) {
  for (auto& nv : values)
    if (nv.name == name) {
      nv.value = std::move(v);
      return;
    }
  values.push_back({name, std::move(v)});
}

namespace {

// A named value as written: nine significant digits, enough for any id or count and more than
// any measurement holds (0.009545218000000005 ms is 0.009545218).
double significant(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return std::strtod(buf, nullptr);
}

json toJson(const Decision& d) {
  json j;
  j["value_id"] = d.value_id;
  j["value_name"] = d.value_name;
  j["producer"] = d.producer;
  j["output_index"] = d.output_index;
  j["consumers"] = d.consumers;
  j["action"] = actionName(d.action);
  j["window_id"] = d.window_id ? json(*d.window_id) : json(nullptr);
  j["predicted_cost_ms"] = roundMs(d.predicted_cost_ms);
  j["predicted_saving_ms"] = roundMs(d.predicted_saving_ms);
  j["anchor"] = toJson(d.anchor);
  j["input_anchor"] = d.input_anchor ? toJson(*d.input_anchor) : json(nullptr);
  j["layout"] = toJson(d.layout);
  j["reason"] = d.reason;
  if (!d.rule.empty())
    j["rule"] = d.rule;
  if (d.blocker != Blocker::None)
    j["blocker"] = toString(d.blocker);
  if (!d.values.empty()) {
    json values = json::object();
    for (const auto& [name, value] : d.values)
      if (const double* n = std::get_if<double>(&value))
        // JSON has no inf or NaN (an unbounded output error): those are written as words.
        values[name] = std::isfinite(*n) ? json(significant(*n))
                                         : json(*n != *n ? "nan"
                                                : *n > 0 ? "inf"
                                                         : "-inf");
      else
        values[name] = std::get<std::string>(value);
    j["values"] = std::move(values);
  }
  j["target"] = toString(d.target);
  if (d.region) {
    j["region"] = toJson(*d.region);
    j["region_layout"] = d.region_layout->name;
    if (!d.holds_for.empty())
      j["holds_for"] = d.holds_for;
  }
  if (d.fused_template_input)
    j["fused_into_producer"] = {{"template_input", *d.fused_template_input}};
  return j;
}

// A decision's named values: an object of numbers and strings.
NamedValues readNamedValues(const JsonReader& r) {
  if (!r.json().is_object())
    r.fail("expected an object of named numbers and words");
  NamedValues out;
  for (const auto& [name, value] : r.json().items()) {
    const JsonReader v = r.at(name);
    if (value.is_string())
      out.push_back({name, v.toString()});
    else
      out.push_back({name, v.toNumber()});
  }
  return out;
}

Decision readDecision(const JsonReader& r) {
  Decision d;
  d.value_id = r.at("value_id").toCount();
  d.value_name = r.getString("value_name", "");
  d.producer = r.at("producer").toCount();
  if (auto i = r.find("output_index"))
    d.output_index = i->toCount();
  d.consumers = r.at("consumers").toIntVector();
  std::string action = r.getString("action");
  auto parsed = parseAction(action);
  if (!parsed)
    r.at("action").fail("unknown action '" + action +
                        "', expected one of 'sync', 'async', 'remove', 'none'");
  d.action = *parsed;
  d.window_id = r.getOptionalInt("window_id");
  if (d.action == Action::Async && !d.window_id)
    r.fail("an 'async' decision needs a window_id");
  d.predicted_cost_ms = r.getNumber("predicted_cost_ms");
  d.predicted_saving_ms = r.getNumber("predicted_saving_ms");
  d.anchor = readAnchor(r.at("anchor"));
  if (auto a = r.find("input_anchor"))
    d.input_anchor = readAnchor(*a);
  if (auto l = r.find("layout"))
    d.layout = readLayout(*l);
  d.reason = r.getString("reason", "");
  d.rule = r.getString("rule", "");
  if (auto b = r.find("blocker"))
    d.blocker = b->toEnum<Blocker>();
  if (auto values = r.find("values"))
    d.values = readNamedValues(*values);
  d.target = r.at("target").toEnum<LayoutTarget>();
  if (auto g = r.find("region")) {
    d.region = readRegionRef(*g);
    d.region_layout = &readRegionLayout(r, "region_layout"); // the layouts' table says which
    if (d.region_layout->target != d.target)
      r.at("target").fail("region layout '" + std::string(d.region_layout->name) + "' runs in " +
                          toString(d.region_layout->target) + ", not " + toString(d.target));
    if (auto h = r.find("holds_for"))
      d.holds_for = h->toStringVector();
  } else if (r.find("region_layout")) {
    r.at("region_layout").fail("a region layout belongs to a region decision");
  } else if (r.find("holds_for")) {
    r.at("holds_for").fail("the shapes a layout holds for belong to a region decision");
  } else if (r.getBool("packed", false)) {
    r.at("packed").fail("packed weights belong to a region decision");
  }
  if (d.region && (d.action == Action::Async || d.action == Action::Remove))
    r.at("action").fail("a region decision is 'sync' (run the region in its target) or 'none'");
  if (auto f = r.find("fused_into_producer")) {
    d.fused_template_input = f->at("template_input").toCount();
    if ((d.action != Action::Sync && d.action != Action::Remove) || d.region ||
        d.target != LayoutTarget::Contiguous)
      r.at("fused_into_producer")
          .fail("only a 'sync' or 'remove' decision to 'contiguous' about a value is fused into "
                "its producer");
  }
  if (!d.region && d.target == LayoutTarget::Blocked)
    r.at("target").fail("the blocked layout is for regions (a decision with a 'region')");
  return d;
}

} // namespace

void Decision::setRegion(RegionRef ref, const LayoutTraits& layout) {
  region = std::move(ref);
  region_layout = &layout;
  target = layout.target;
}

json toJson(const Schedule& s) {
  json j;
  j["schema"] = kScheduleSchema;
  j["schema_version"] = kScheduleVersion;
  j["tool"] = {{"name", "xsched"}, {"version", s.tool_version}};
  j["model"] = toJson(s.model);
  if (s.device)
    j["device"] = toJson(*s.device);
  j["ops"] = json::array();
  for (const auto& op : s.ops)
    j["ops"].push_back(toJson(op));
  j["gpu_idle_events"] = json::array();
  for (const auto& e : s.gpu_idle_events)
    j["gpu_idle_events"].push_back(toJson(e));
  j["decisions"] = json::array();
  for (const auto& d : s.decisions)
    j["decisions"].push_back(toJson(d));
  if (!s.inputs.empty() || !s.input_file.empty()) {
    j["inputs"] = json::array();
    for (const auto& in : s.inputs)
      j["inputs"].push_back(toJson(in));
    j["input_file"] = s.input_file;
  }
  const auto& m = s.summary;
  j["summary"] = {
      {"predicted_time_before_ms", roundMs(m.predicted_time_before_ms)},
      {"predicted_time_after_ms", roundMs(m.predicted_time_after_ms)},
      {"peak_bytes_before", m.peak_bytes_before},
      {"peak_bytes_after", m.peak_bytes_after},
      {"memory_budget_bytes", m.memory_budget_bytes ? json(*m.memory_budget_bytes) : json(nullptr)},
      {"solver", m.solver},
      {"optimal", m.optimal},
      {"gap", m.gap},
      {"predicted_time_bound_ms", roundMs(m.predicted_time_bound_ms)},
      {"nodes", m.nodes},
      {"window_safety", m.window_safety},
      {"form", m.form ? json(toString(*m.form)) : json(nullptr)},
      {"counts",
       {{"sync", s.count(Action::Sync)},
        {"async", s.count(Action::Async)},
        {"remove", s.count(Action::Remove)},
        {"none", s.count(Action::None)}}}};
  if (m.whole_run)
    j["summary"]["whole_run"] = true;
  if (m.tolerance)
    j["summary"]["tolerance"] = *m.tolerance;
  if (m.measured_error)
    j["summary"]["measured_error"] = *m.measured_error;
  if (!m.fusions.empty()) {
    json fused = json::array();
    for (const auto& f : m.fusions)
      fused.push_back({{"name", f.name}, {"count", f.count}});
    j["summary"]["fusions"] = fused;
  }
  return j;
}

Schedule readSchedule(const JsonReader& r) {
  Schedule s;
  if (auto t = r.find("tool"))
    s.tool_version = t->getString("version", "");
  s.model = readModelInfo(r.at("model"));
  if (auto d = r.find("device"))
    s.device = readDeviceInfo(*d);
  r.at("ops").forEach([&](const JsonReader& e) { s.ops.push_back(readOp(e)); });
  r.at("gpu_idle_events").forEach([&](const JsonReader& e) {
    s.gpu_idle_events.push_back(readIdleEvent(e));
  });
  r.at("decisions").forEach([&](const JsonReader& e) {
    s.decisions.push_back(readDecision(e));
    const auto& d = s.decisions.back();
    if (d.window_id) {
      bool known = false;
      for (const auto& w : s.gpu_idle_events)
        known |= w.id == *d.window_id;
      if (!known)
        e.at("window_id").fail("unknown window id " + std::to_string(*d.window_id));
    }
  });
  if (auto in = r.find("inputs"))
    in->forEach([&](const JsonReader& e) { s.inputs.push_back(readInputSpec(e)); });
  s.input_file = r.getString("input_file", "");
  auto m = r.at("summary");
  s.summary.predicted_time_before_ms = m.getNumber("predicted_time_before_ms");
  s.summary.predicted_time_after_ms = m.getNumber("predicted_time_after_ms");
  s.summary.peak_bytes_before = m.at("peak_bytes_before").toCount();
  s.summary.peak_bytes_after = m.at("peak_bytes_after").toCount();
  s.summary.memory_budget_bytes = m.getOptionalInt("memory_budget_bytes");
  s.summary.solver = m.getString("solver");
  s.summary.optimal = m.getBool("optimal");
  s.summary.gap = m.at("gap").toNonNegative();
  s.summary.predicted_time_bound_ms =
      m.getNumber("predicted_time_bound_ms", s.summary.predicted_time_after_ms);
  s.summary.nodes = static_cast<std::int64_t>(m.getNonNegative("nodes", 0));
  s.summary.whole_run = m.getBool("whole_run", false);
  s.summary.window_safety = m.getNumber("window_safety", 0.9);
  if (auto f = m.find("form"); f && !f->isNull())
    s.summary.form = f->toEnum<RewriteForm>();
  if (auto f = m.find("tolerance")) {
    s.summary.tolerance = f->toNonNegative();
    if (*s.summary.tolerance > kMaxTolerance) {
      char most[32];
      std::snprintf(most, sizeof most, "%g", kMaxTolerance);
      f->fail(std::string("a schedule's tolerance is at most ") + most +
              " (outputs that move further are not the same outputs)");
    }
  }
  if (auto f = m.find("measured_error"))
    s.summary.measured_error = f->toNonNegative();
  if (auto f = m.find("fusions"))
    f->forEach([&](const JsonReader& e) {
      s.summary.fusions.push_back({e.getString("name"), e.at("count").toCount()});
    });
  return s;
}

} // namespace xalloc::formats
