// JSON mapping of the shared types (layouts, anchors, ops, ...) and layout arithmetic.
#include "xalloc/formats/types.h"

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "xalloc/formats/json_reader.h"

namespace xalloc::formats {

using nlohmann::json;

std::int64_t dtypeSize(const std::string& dtype) {
  static const std::map<std::string, std::int64_t> sizes = {
      {"bool", 1},      {"uint8", 1},       {"int8", 1},     {"int16", 2},   {"int32", 4},
      {"int64", 8},     {"float16", 2},     {"bfloat16", 2}, {"float32", 4}, {"float64", 8},
      {"complex64", 8}, {"complex128", 16}, {"qint8", 1},    {"quint8", 1},  {"qint32", 4}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::int64_t Layout::numel() const {
  std::int64_t n = 1;
  for (auto s : sizes)
    n *= s;
  return n;
}

bool Layout::isContiguous() const {
  if (numel() == 0)
    return true;
  std::int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1)
      continue;
    if (strides[i] != expected)
      return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {
std::string joinInts(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string compilerLocation(const std::string& file, std::int64_t line, std::int64_t col) {
  if (file.empty() || line <= 0)
    return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(col);
}
} // namespace

std::string Layout::key() const {
  return dtype + joinInts(sizes) + "/" + joinInts(strides) + "@" + device;
}

std::string Layout::sizesText() const {
  return joinInts(sizes);
}

bool Anchor::sameSite(const Anchor& o) const {
  return file == o.file && function == o.function && expr == o.expr && op == o.op &&
         ordinal == o.ordinal;
}

const Op* findOp(const std::vector<Op>& ops, std::int64_t id) {
  if (id >= 0 && static_cast<std::size_t>(id) < ops.size() && ops[id].id == id)
    return &ops[id];
  for (const auto& op : ops)
    if (op.id == id)
      return &op;
  return nullptr;
}

std::string SourceLoc::location() const {
  return compilerLocation(file, line, col);
}

std::string Anchor::location() const {
  return compilerLocation(file, line, col);
}

std::string Anchor::describe() const {
  std::string s = file.empty() ? std::string("<unknown>") : location();
  if (!function.empty())
    s += " " + function;
  if (!expr.empty())
    s += " `" + expr + "`";
  s += " " + op;
  if (ordinal > 0)
    s += " #" + std::to_string(ordinal);
  return s;
}

double roundMs(double ms) {
  return std::round(ms * 1e6) / 1e6;
}

void putLayout(json& obj, const Layout& v) {
  obj["sizes"] = v.sizes;
  obj["strides"] = v.strides;
  obj["storage_offset"] = v.storage_offset;
  obj["dtype"] = v.dtype;
  obj["device"] = v.device;
}

json toJson(const Layout& v) {
  json j = json::object();
  putLayout(j, v);
  return j;
}

Layout readLayout(const JsonReader& r) {
  Layout l;
  l.sizes = r.at("sizes").toIntVector();
  l.strides = r.at("strides").toIntVector();
  if (l.strides.size() != l.sizes.size())
    r.at("strides").fail("expected " + std::to_string(l.sizes.size()) +
                         " strides (one per dimension of sizes), got " +
                         std::to_string(l.strides.size()));
  for (std::size_t i = 0; i < l.sizes.size(); ++i)
    if (l.sizes[i] < 0)
      r.at("sizes").at(i).fail("expected a non-negative size");
  l.storage_offset = r.getInt("storage_offset", 0);
  l.dtype = r.getString("dtype");
  if (dtypeSize(l.dtype) == 0)
    r.at("dtype").fail("unknown dtype '" + l.dtype + "'");
  l.device = r.getString("device", "cpu");
  return l;
}

json toJson(const SourceLoc& v) {
  return json{{"file", v.file}, {"line", v.line}, {"col", v.col}, {"text", v.text}};
}

SourceLoc readSourceLoc(const JsonReader& r) {
  SourceLoc s;
  s.file = r.getString("file", "");
  s.line = r.find("line") ? r.at("line").toCount() : 0;
  s.col = r.find("col") ? r.at("col").toCount() : 0;
  s.text = r.getString("text", "");
  return s;
}

json toJson(const Anchor& v) {
  return json{{"file", v.file},       {"function", v.function}, {"expr", v.expr}, {"op", v.op},
              {"ordinal", v.ordinal}, {"line", v.line},         {"col", v.col}};
}

Anchor readAnchor(const JsonReader& r) {
  Anchor a;
  a.file = r.getString("file");
  a.function = r.getString("function");
  a.expr = r.getString("expr");
  a.op = r.getString("op");
  a.ordinal = r.at("ordinal").toCount();
  a.line = r.find("line") ? r.at("line").toCount() : 0;
  a.col = r.find("col") ? r.at("col").toCount() : 0;
  return a;
}

json toJson(const ModelInfo& v) {
  json j{
      {"path", v.path}, {"sha256", v.sha256}, {"format", toString(v.format)}, {"method", v.method}};
  if (v.frozen)
    j["frozen"] = *v.frozen;
  return j;
}

ModelInfo readModelInfo(const JsonReader& r) {
  ModelInfo m;
  m.path = r.getString("path");
  m.sha256 = r.getString("sha256", "");
  if (auto f = r.find("format"))
    m.format = f->toEnum<ModelFormat>();
  m.method = r.getString("method", "forward");
  if (auto f = r.find("frozen"))
    m.frozen = f->toBool();
  return m;
}

json toJson(const InputSpec& v) {
  json j{{"name", v.name}, {"shape", v.shape}, {"dtype", v.dtype}};
  if (v.low)
    j["low"] = *v.low;
  if (v.high)
    j["high"] = *v.high;
  return j;
}

InputSpec readInputSpec(const JsonReader& r) {
  InputSpec s;
  s.name = r.getString("name", "");
  s.shape = r.at("shape").toIntVector();
  for (std::size_t i = 0; i < s.shape.size(); ++i)
    if (s.shape[i] < 0)
      r.at("shape").at(i).fail("expected a non-negative size");
  s.dtype = r.getString("dtype", "float32");
  if (dtypeSize(s.dtype) == 0)
    r.at("dtype").fail("unknown dtype '" + s.dtype + "'");
  s.low = r.getOptionalNumber("low");
  s.high = r.getOptionalNumber("high");
  if (s.low && s.high && *s.high <= *s.low)
    r.at("high").fail("expected high > low");
  return s;
}

json toJson(const CacheInfo& v) {
  return json{{"l1d_bytes", v.l1d_bytes}, {"l2_bytes", v.l2_bytes}, {"l3_bytes", v.l3_bytes}};
}

json toJson(const DeviceInfo& v) {
  json j{{"type", v.type},
         {"name", v.name},
         {"threads", v.threads},
         {"cores", v.cores},
         {"copy_bandwidth_gbps", v.copy_bandwidth_gbps},
         {"caches", toJson(v.caches)}};
  if (!v.libraries.empty())
    j["libraries"] = v.libraries;
  if (v.blas_threads > 0)
    j["blas_threads"] = v.blas_threads;
  return j;
}

DeviceInfo readDeviceInfo(const JsonReader& r) {
  DeviceInfo d;
  d.type = r.getString("type");
  d.name = r.getString("name", "");
  d.threads = r.getInt("threads", 1);
  if (d.threads < 1)
    r.at("threads").fail("expected a thread count of at least 1");
  d.cores = r.getInt("cores", d.threads);
  if (d.cores < 1)
    r.at("cores").fail("expected a core count of at least 1");
  d.copy_bandwidth_gbps = r.getNonNegative("copy_bandwidth_gbps", 0);
  if (auto c = r.find("caches")) {
    d.caches.l1d_bytes = c->getInt("l1d_bytes", 0);
    d.caches.l2_bytes = c->getInt("l2_bytes", 0);
    d.caches.l3_bytes = c->getInt("l3_bytes", 0);
  }
  d.libraries = r.getString("libraries", "");
  d.blas_threads = r.getInt("blas_threads", 0);
  if (d.blas_threads < 0)
    r.at("blas_threads").fail("expected a non-negative thread count");
  return d;
}

json toJson(const Op& v) {
  return json{{"id", v.id},
              {"kind", v.kind},
              {"source", toJson(v.source)},
              {"anchor", toJson(v.anchor)},
              {"scope", v.scope},
              {"start_ms", roundMs(v.start_ms)},
              {"duration_ms", roundMs(v.duration_ms)},
              {"duration_spread_ms", roundMs(v.duration_spread_ms)},
              {"runs", v.runs},
              {"noisy", v.noisy},
              {"utilization", std::round(v.utilization * 1e4) / 1e4},
              {"inputs", v.inputs},
              {"outputs", v.outputs}};
}

Op readOp(const JsonReader& r) {
  Op o;
  o.id = r.at("id").toCount();
  o.kind = r.getString("kind");
  if (auto s = r.find("source"))
    o.source = readSourceLoc(*s);
  if (auto a = r.find("anchor"))
    o.anchor = readAnchor(*a);
  o.scope = r.getString("scope", "");
  o.start_ms = r.getNonNegative("start_ms", 0);
  o.duration_ms = r.at("duration_ms").toNonNegative();
  o.noisy = r.getBool("noisy", false);
  o.duration_spread_ms = r.getNonNegative("duration_spread_ms", 0);
  o.runs = r.find("runs") ? r.at("runs").toCount() : 1;
  o.utilization = r.getNumber("utilization", 0);
  if (!(o.utilization >= 0 && o.utilization <= 1))
    r.at("utilization").fail("expected a number from 0 to 1");
  if (auto i = r.find("inputs"))
    o.inputs = i->toIntVector();
  if (auto out = r.find("outputs"))
    o.outputs = out->toIntVector();
  return o;
}

json toJson(const IdleEvent& v) {
  return json{{"id", v.id},
              {"before_op_id", v.before_op_id},
              {"after_op_id", v.after_op_id},
              {"start_ms", roundMs(v.start_ms)},
              {"duration_ms", roundMs(v.duration_ms)},
              {"spare_cores", std::round(v.spare_cores * 1e4) / 1e4},
              {"device", v.device},
              {"kind", v.kind}};
}

IdleEvent readIdleEvent(const JsonReader& r) {
  IdleEvent e;
  e.id = r.at("id").toCount();
  e.before_op_id = r.at("before_op_id").toCount();
  e.after_op_id = r.at("after_op_id").toCount();
  e.start_ms = r.getNonNegative("start_ms", 0);
  e.duration_ms = r.at("duration_ms").toNonNegative();
  e.spare_cores = r.getNonNegative("spare_cores", 0);
  e.device = r.getString("device", "cpu");
  e.kind = r.getString("kind", "");
  return e;
}

std::string ConversionCost::key() const {
  return target == LayoutTarget::Contiguous ? layout.key() : layout.key() + "->" + toString(target);
}

json toJson(const ConversionCost& v) {
  json j = json::object();
  putLayout(j, v.layout);
  std::vector<double> samples;
  samples.reserve(v.samples_ms.size());
  for (double s : v.samples_ms)
    samples.push_back(roundMs(s));
  j["key"] = v.key();
  j["bytes"] = v.layout.bytes();
  j["samples_ms"] = samples;
  j["median_ms"] = roundMs(v.median_ms);
  j["spread_ms"] = roundMs(v.spread_ms);
  j["noisy"] = v.noisy;
  j["source"] = v.source;
  if (v.reference_ms)
    j["reference_ms"] = roundMs(*v.reference_ms);
  if (v.ratio)
    j["ratio"] = std::round(*v.ratio * 1e6) / 1e6;
  if (v.ratio_spread)
    j["ratio_spread"] = std::round(*v.ratio_spread * 1e6) / 1e6;
  if (v.allocation_ms)
    j["allocation_ms"] = roundMs(*v.allocation_ms);
  if (v.allocation_spread_ms)
    j["allocation_spread_ms"] = roundMs(*v.allocation_spread_ms);
  if (v.target != LayoutTarget::Contiguous)
    j["target"] = toString(v.target);
  return j;
}

ConversionCost readConversionCost(const JsonReader& r) {
  ConversionCost c;
  c.layout = readLayout(r);
  c.samples_ms = r.at("samples_ms").toNumberVector();
  c.median_ms = r.at("median_ms").toNonNegative();
  c.spread_ms = r.getNonNegative("spread_ms", 0);
  c.noisy = r.getBool("noisy", false);
  c.source = r.getString("source", "model");
  if (auto f = r.find("reference_ms"))
    c.reference_ms = f->toNonNegative();
  if (auto f = r.find("ratio"))
    c.ratio = f->toNonNegative();
  if (auto f = r.find("ratio_spread"))
    c.ratio_spread = f->toNonNegative();
  if (auto f = r.find("allocation_ms"))
    c.allocation_ms = f->toNonNegative();
  if (auto f = r.find("allocation_spread_ms"))
    c.allocation_spread_ms = f->toNonNegative();
  if (auto f = r.find("target")) {
    c.target = f->toEnum<LayoutTarget>();
    if (c.target == LayoutTarget::Blocked)
      f->fail("a conversion's target is 'contiguous', 'channels_last' or 'channels_last_3d' "
              "(blocked tensors are made by regions)");
  }
  for (std::size_t i = 0; i < c.samples_ms.size(); ++i)
    if (c.samples_ms[i] < 0)
      r.at("samples_ms").at(i).fail("expected a non-negative time");
  return c;
}

} // namespace xalloc::formats
