// profileModel: op timings, value records with layouts and lifetimes, idle windows, conversion
// costs, consumer re-runs with both layouts, and the optional sweep; measurements already in
// the timing database are reused.
#include "xalloc/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/version.h>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/consumers.h"
#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/idle_windows.h"
#include "xalloc/profiler/inputs.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/progress.h"
#include "xalloc/profiler/signature.h"
#include "xalloc/profiler/sweep.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/profiler/trace.h"
#include "xalloc/torch_compat.h"
#include "xalloc/tspass/constants.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/mutation.h"
#include "xalloc/version.h"

namespace xalloc::profiler {

using formats::Record;
using torch::jit::Node;
using torch::jit::Value;

namespace {

// The version of how xprof measures: raised whenever a change makes stored measurements
// incomparable with new ones, so that the database never mixes the two.
// 4: ops numbered on the model passed through the serializer (tspass::canonicalize).
constexpr int kMeasureMethod = 4;
// The version of what xprof concludes from its measurements (records, safety judgements):
// raised when the same measurements would make a different profile, so that a finished
// profile stored before is not handed back. 2: tensor attributes alias by storage.
// 3: values computed from constants alone have origin "constant". 4: module_storage.
// 5: ops say how many times they ran (runs). 6: attributes the graph assigns hold what it
// assigns them (tspass::MutationInfo); a loop's values are those of its heaviest trip.
// 7: conversion costs say what a fresh output costs (allocation_ms); loop values say what their
// trips add up to (runs_by_bytes).
constexpr int kProfileAnalysis = 7;
// Passes over the sweep's layouts (conversion_cost.h: measureInPasses).
constexpr int kSweepPasses = 3;

class Profiler {
public:
  explicit Profiler(const ProfileOptions& o) : o_(o), progress_(o.progress) {}

  formats::Profile run() {
    if (o_.iterations < 1 || o_.repeats < 1 || o_.warmup < 0)
      throw InputError("xprof", "--iterations and --repeats must be at least 1");
    if (o_.sweep && o_.sweep_count < 1)
      throw InputError("xprof", "--sweep-count must be at least 1");
    if (o_.threads > 0)
      at::set_num_threads(o_.threads);
    steadyStateMalloc();
    progress_.phase("loading", 1);
    tspass::LoadedModel model = tspass::loadModel(o_.model);
    p_.tool_version = kVersion;
    p_.model.path = o_.model;
    p_.model.sha256 = model.sha256;
    p_.model.format = "torchscript";
    p_.model.method = o_.method;
    // Numbered as xrewrite numbers it, on the form every saved copy of the model has.
    tspass::canonicalize(model, o_.method);
    auto method = model.module.find_method(o_.method);
    prepareInputs(model);
    p_.settings.iterations = o_.iterations;
    p_.settings.warmup = o_.warmup;
    p_.settings.repeats = o_.repeats;
    p_.settings.seed = o_.seed;
    p_.settings.sweep = o_.sweep;

    p_.device = describeCpu(/*measure_bandwidth=*/false);
    openDb();
    const std::string memo_key = profileKey();
    if (auto cached = cachedProfile(memo_key)) {
      answerLauncher(memo_key);
      return std::move(*cached);
    }
    p_.device.copy_bandwidth_gbps = cachedBandwidth();

    // Profile an inlined copy: the module's own graph stays untouched.
    graph_ = method->graph()->copy();
    torch::jit::Inline(*graph_);
    exposed_ = tspass::exposeLinearWeights(*graph_);
    index_ = std::make_unique<tspass::GraphIndex>(*graph_);
    tspass::MutationInfo mutation(graph_, &model.module);
    runner_ = std::make_unique<GraphRunner>(*index_);

    GraphRunner::Trace capture; // the first run: it also fails early on a broken model

    runModel({/*keep_values=*/true, false, false}, &capture);
    timeOps(capture);
    buildRecords(capture, mutation);
    measureConversions(capture);
    if (o_.measure_consumers)
      measureConsumers(capture);
    if (o_.sweep)
      measureSweep();
    p_.gpu_idle_events =
        findCpuIdleWindows(timeline_, p_.ops, static_cast<int>(p_.device.cores), o_.min_window_ms);
    progress_.finish();
    if (db_) {
      p_.settings.timing_db = db_->path();
      p_.settings.db_hits = db_->hits();
      p_.settings.db_misses = db_->misses();
      db_->putDocument(memo_key, formats::toJson(p_).dump());
      db_->commit();
      answerLauncher(memo_key);
    }
    if (!o_.trace_path.empty())
      writeChromeTrace(o_.trace_path, p_, timeline_);
    return std::move(p_);
  }

private:
  void prepareInputs(tspass::LoadedModel& model) {
    std::vector<c10::IValue> tensors;
    if (!o_.input_file.empty()) {
      const std::string bytes = readFile(o_.input_file);
      input_file_sha256_ = sha256Hex(bytes);
      tensors = parseInputFile(bytes, o_.input_file);
      p_.settings.input_file = o_.input_file;
      for (std::size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].isTensor()) {
          const at::Tensor& t = tensors[i].toTensor();
          p_.settings.inputs.push_back({"input" + std::to_string(i), t.sizes().vec(),
                                        compat::dtypeName(t.scalar_type()), std::nullopt,
                                        std::nullopt});
        }
    } else {
      p_.settings.inputs =
          o_.inputs.empty() ? specFromExtraFiles(model.extra_files, o_.model) : o_.inputs;
      tensors = makeInputs(p_.settings.inputs, static_cast<std::uint64_t>(o_.seed));
    }
    inputs_ = methodInputs(model.module, o_.method, std::move(tensors), o_.model);
  }

  // The device fingerprint scopes the database: measurements from another CPU, core count,
  // thread count or cache size never count here, nor those taken on another BLAS (Debian's
  // reference BLAS and OpenBLAS differ ten-fold in a linear, and in its output bits).
  void openDb() {
    if (!o_.use_db)
      return;
    const auto& d = p_.device;
    std::string device =
        d.type + "|" + d.name + "|cores=" + std::to_string(d.cores) +
        "|threads=" + std::to_string(d.threads) + "|caches=" + std::to_string(d.caches.l1d_bytes) +
        "," + std::to_string(d.caches.l2_bytes) + "," + std::to_string(d.caches.l3_bytes);
    std::string library = std::string("torch ") + TORCH_VERSION + "|xalloc " + kVersion +
                          "|method " + std::to_string(kMeasureMethod) + "|" + d.libraries;
    db_ = std::make_unique<TimingDb>(o_.db_path.empty() ? TimingDb::defaultPath() : o_.db_path,
                                     device, library);
    db_device_ = device;
    db_library_ = library;
  }

  // A finished profile is reused whole when the model's bytes, the inputs and every setting
  // that shapes the profile are the same (device and library scope the database as always):
  // the same graph on the same inputs takes the same path and sees the same layouts, so the
  // capture run and the correctness checks would give the same answers. A trace needs the
  // timeline run, so --trace always profiles.
  std::string profileKey() const {
    if (!db_)
      return {};
    nlohmann::json k = {
        {"model", p_.model.sha256},
        {"method", o_.method},
        {"inputs", nlohmann::json::array()},
        {"input_file", input_file_sha256_},
        {"iterations", o_.iterations},
        {"warmup", o_.warmup},
        {"repeats", o_.repeats},
        {"seed", o_.seed},
        {"consumers", o_.measure_consumers},
        {"sweep", o_.sweep ? nlohmann::json{o_.sweep_count, o_.sweep_max_bytes} : nlohmann::json()},
        {"min_window_ms", o_.min_window_ms},
        {"analysis", kProfileAnalysis}};
    for (const auto& in : p_.settings.inputs)
      k["inputs"].push_back(formats::toJson(in));
    return "profile|" + sha256Hex(k.dump());
  }

  std::optional<formats::Profile> cachedProfile(const std::string& key) {
    if (!db_ || !o_.trace_path.empty())
      return std::nullopt;
    // A damaged or older entry reads as none: profile again (and overwrite it).
    auto body = db_->getDocument(key);
    return body ? launch::reusedProfile(*body, o_.model, o_.input_file, db_->path()) : std::nullopt;
  }

  // Run by xprof's launcher: tell it where this invocation's finished profile is.
  void answerLauncher(const std::string& memo_key) {
    const char* key = std::getenv(launch::kKeyEnv);
    if (key && *key)
      launch::store(db_->path(), key, {db_device_, db_library_, memo_key, o_.model, o_.input_file});
  }

  double cachedBandwidth() {
    if (db_)
      if (auto hit = db_->get("copy-bandwidth"))
        return hit->aux;
    const double gbps = std::round(measureCopyBandwidthGbps() * 1000) / 1000;
    if (db_)
      db_->put("copy-bandwidth", {{}, gbps});
    return gbps;
  }

  // One run of the whole graph; a failure of the model itself becomes a clear InputError.
  void runModel(const GraphRunner::Options& options, GraphRunner::Trace* trace) {
    try {
      runner_->run(inputs_, options, trace);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(o_.model, "the model failed on the example inputs: " + firstLine(e.what()));
    }
  }

  std::vector<c10::IValue> inputsOf(const Node* n, const GraphRunner::Trace& t) const {
    std::vector<c10::IValue> in;
    for (const Value* v : n->inputs()) {
      if (!runner_->hasValue(t, v))
        return {};
      in.push_back(runner_->valueOf(t, v));
    }
    return in;
  }

  // Per-op median wall time over `iterations` runs and utilization from process CPU time, both
  // reused from the database when every executed op is there; then one timeline run for the
  // start times and the gaps between ops.
  void timeOps(const GraphRunner::Trace& capture) {
    const std::size_t n = index_->ops().size();
    std::vector<std::string> keys(n);
    std::vector<std::optional<StoredTiming>> cached(n);
    bool complete = db_ != nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      const Node* node = index_->ops()[i];
      if (node->kind() == c10::prim::If || node->kind() == c10::prim::Loop)
        continue; // their time is their blocks' ops
      auto in = inputsOf(node, capture);
      const bool executed = !in.empty() || node->inputs().empty();
      if (!executed)
        continue; // in a branch the example inputs did not take
      if (index_->inLoop(static_cast<std::int64_t>(i))) {
        complete = false; // runs several times with different arguments: always measured
        continue;
      }
      keys[i] = "op|" + opSignature(node, in) + "|it" + std::to_string(o_.iterations);
      if (db_)
        cached[i] = db_->get(keys[i]);
      complete = complete && cached[i].has_value();
    }
    const auto groups = groupByKey(keys);
    std::vector<TimingStats> stats(n);
    if (complete) {
      for (std::size_t i = 0; i < n; ++i)
        if (cached[i])
          stats[i] = cached[i]->stats;
    } else {
      // The first warm-up run's time scales the counts down for a slow model (budgetedCounts).
      Counts runs{o_.warmup, o_.iterations};
      progress_.phase("timing ops", static_cast<std::size_t>(runs.warmup + runs.repeats));
      if (runs.warmup > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        runModel({}, nullptr);
        runs = budgetedCounts(msSince(t0), o_.warmup, o_.iterations, kModelBudgetMs, 3);
        progress_.phase("timing ops", static_cast<std::size_t>(runs.warmup + runs.repeats));
        progress_.tick(1);
      }
      for (int i = 1; i < runs.warmup; ++i) {
        runModel({}, nullptr);
        progress_.tick(static_cast<std::size_t>(i + 1));
      }
      std::vector<std::vector<double>> samples(n);
      GraphRunner::Trace t;
      for (int it = 0; it < runs.repeats; ++it) {
        runModel({false, /*time_ops=*/true, false}, &t);
        for (std::size_t i = 0; i < n; ++i)
          samples[i].push_back(t.op_ms[i]);
        progress_.tick(static_cast<std::size_t>(runs.warmup + it + 1));
      }
      // Ops with the same signature (the same op on the same layouts) share one entry in the
      // database: their samples are pooled here too, so this profile and a later one that
      // reads the entry report the same time.
      for (const auto& [key, members] : groups) {
        std::vector<double> pooled;
        for (std::size_t i : members)
          pooled.insert(pooled.end(), samples[i].begin(), samples[i].end());
        const TimingStats s = summarize(pooled);
        for (std::size_t i : members)
          stats[i] = s;
      }
      for (std::size_t i = 0; i < n; ++i)
        if (keys[i].empty())
          stats[i] = summarize(samples[i]);
    }
    // The timeline run: start times (and process CPU time per op, unless cached). A timeline
    // is reused only with every op timing: its key names the model and every executed op with
    // its argument layouts, so another input shape or another path through the graph misses.
    GraphRunner::Trace line;
    std::string line_key;
    if (db_) {
      std::string all;
      for (const auto& k : keys)
        all += k + "\n";
      line_key = "timeline|" + p_.model.sha256 + "|" + sha256Hex(all);
    }
    if (!(complete && loadTimeline(line_key, n, line))) {
      runModel({false, /*time_ops=*/true, /*cpu_time=*/!complete}, &line);
      if (db_)
        storeTimeline(line_key, line);
    }
    const double cores = static_cast<double>(p_.device.cores);
    std::vector<std::optional<double>> utilization(n);
    for (std::size_t i = 0; i < n; ++i)
      if (complete && cached[i])
        utilization[i] = cached[i]->aux;
      else if (line.op_ms[i] > 0.001)
        utilization[i] = std::clamp(line.op_cpu_ms[i] / (line.op_ms[i] * cores), 0.0, 1.0);
    if (!complete)
      for (const auto& [key, members] : groups) {
        double sum = 0;
        int count = 0;
        for (std::size_t i : members)
          if (utilization[i]) {
            sum += *utilization[i];
            ++count;
          }
        for (std::size_t i : members)
          utilization[i] = count ? std::optional<double>(sum / count) : std::nullopt;
        if (db_)
          db_->put(key, {stats[members.front()], utilization[members.front()].value_or(0.0)});
      }
    timeline_.assign(n, OpTiming{});
    for (std::size_t i = 0; i < n; ++i) {
      const Node* node = index_->ops()[i];
      formats::Op op;
      op.id = static_cast<std::int64_t>(i);
      op.kind = node->kind().toQualString();
      op.source = index_->source(op.id).loc;
      op.anchor = index_->anchor(op.id);
      op.scope = index_->scope(op.id);
      op.duration_ms = stats[i].median_ms;
      op.runs = i < capture.op_runs.size() ? capture.op_runs[i] : 1;
      op.duration_spread_ms = stats[i].iqr_ms;
      op.noisy = isNoisy(stats[i]);
      op.start_ms = std::max(0.0, line.op_start_ms[i]);
      timeline_[i] = {line.op_start_ms[i], line.op_ms[i]};
      if (utilization[i])
        op.utilization = *utilization[i];
      for (const Value* v : node->inputs())
        if (v->type()->cast<c10::TensorType>() && index_->valueId(v) >= 0)
          op.inputs.push_back(index_->valueId(v));
      for (const Value* v : node->outputs())
        if (v->type()->cast<c10::TensorType>())
          op.outputs.push_back(index_->valueId(v));
      p_.ops.push_back(std::move(op));
    }
    if (db_)
      db_->commit();
  }

  static std::map<std::string, std::vector<std::size_t>>
  groupByKey(const std::vector<std::string>& keys) {
    std::map<std::string, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (!keys[i].empty())
        groups[keys[i]].push_back(i);
    return groups;
  }

  // A timeline is stored as two entries whose samples are the ops' start times and durations.
  bool loadTimeline(const std::string& key, std::size_t n, GraphRunner::Trace& line) {
    if (!db_)
      return false;
    auto hit = db_->getAll({key + "|start", key + "|duration"});
    if (!hit || (*hit)[0].stats.samples_ms.size() != n || (*hit)[1].stats.samples_ms.size() != n)
      return false;
    line.op_start_ms = std::move((*hit)[0].stats.samples_ms);
    line.op_ms = std::move((*hit)[1].stats.samples_ms);
    line.op_cpu_ms.assign(n, 0.0);
    return true;
  }

  void storeTimeline(const std::string& key, const GraphRunner::Trace& line) {
    StoredTiming starts, durations;
    starts.stats.samples_ms = line.op_start_ms;
    durations.stats.samples_ms = line.op_ms;
    db_->put(key + "|start", starts);
    db_->put(key + "|duration", durations);
  }

  void buildRecords(const GraphRunner::Trace& t, const tspass::MutationInfo& mutation) {
    const auto last_op = static_cast<std::int64_t>(index_->ops().size()) - 1;
    std::set<const Value*> outputs(graph_->outputs().begin(), graph_->outputs().end());
    // A tuple output's elements are outputs too.
    for (const Value* o : graph_->outputs())
      if (o->node()->kind() == c10::prim::TupleConstruct)
        outputs.insert(o->node()->inputs().begin(), o->node()->inputs().end());
    std::map<const c10::StorageImpl*, std::int64_t> storage_ids;
    const std::set<const c10::StorageImpl*> module_storages = runner_->moduleStorages(t);
    const auto& values = index_->values();
    for (std::size_t id = 0; id < values.size(); ++id) {
      const Value* v = values[id];
      auto it = t.values.find(v);
      if (it == t.values.end() || !it->second.isTensor())
        continue;
      const at::Tensor& tensor = it->second.toTensor();
      Record r;
      r.id = static_cast<std::int64_t>(id);
      r.name = v->debugName();
      const Node* p = v->node();
      if (p->kind() == c10::prim::Param) {
        r.origin = "input";
        r.first_use = 0;
        if (p->owningBlock() != graph_->block()) {
          // A loop body's block input: it changes every trip and has no node of its own.
          r.producer_op = index_->opId(p->owningBlock()->owningNode());
          r.output_index = static_cast<std::int64_t>(v->offset());
          r.origin = "loop-carried";
          r.in_loop = true;
        }
      } else {
        r.producer_op = index_->opId(p);
        r.output_index = static_cast<std::int64_t>(v->offset());
        r.origin = p->kind() == c10::prim::GetAttr ? "attribute"
                   : tspass::isConstantTensor(v)   ? "constant"
                                                   : "op";
      }
      if (r.producer_op)
        r.first_use = *r.producer_op;
      r.layout = layoutOf(tensor);
      r.contiguous = tensor.is_contiguous();
      r.bytes = static_cast<std::int64_t>(tensor.numel()) *
                static_cast<std::int64_t>(tensor.element_size());
      const c10::StorageImpl* storage = storageOf(tensor);
      auto sid = storage_ids.emplace(storage, static_cast<std::int64_t>(storage_ids.size()));
      r.storage_id = sid.first->second;
      r.storage_bytes = storage ? static_cast<std::int64_t>(storage->nbytes()) : 0;
      r.module_storage = storage && module_storages.count(storage) > 0;
      r.last_use = r.first_use;
      for (const auto& use : v->uses()) {
        auto uid = index_->opId(use.user);
        if (uid >= 0)
          r.last_use = std::max(r.last_use, uid);
      }
      r.is_output = outputs.count(v) > 0;
      if (r.is_output)
        r.last_use = std::max(r.last_use, last_op);
      r.in_loop = r.in_loop || (r.producer_op && index_->inLoop(*r.producer_op));
      if (r.in_loop && r.bytes > 0)
        if (auto made = t.bytes_made.find(v); made != t.bytes_made.end())
          r.runs_by_bytes = static_cast<double>(made->second) / static_cast<double>(r.bytes);
      r.has_writers = mutation.hasWriters(v);
      r.view_chain = viewChain(v, t);
      std::set<const Node*> seen;
      for (const auto& use : v->uses()) {
        auto uid = index_->opId(use.user);
        if (uid < 0 || !seen.insert(use.user).second)
          continue;
        formats::ConsumerTiming c;
        c.op_id = uid;
        c.input_index = static_cast<std::int64_t>(use.offset);
        r.consumers.push_back(c);
      }
      std::sort(r.consumers.begin(), r.consumers.end(),
                [](const auto& a, const auto& b) { return a.op_id < b.op_id; });
      p_.records.push_back(std::move(r));
    }
  }

  void measureConversions(const GraphRunner::Trace& t) {
    std::map<std::string, const Record*> todo;
    for (const Record& r : p_.records)
      if (!r.contiguous && r.layout.numel() > 0)
        todo.emplace(r.layout.key(), &r);
    progress_.phase("measuring conversions", todo.size());
    std::size_t done = 0;
    for (const auto& [key, r] : todo) {
      const at::Tensor& tensor =
          runner_->valueOf(t, index_->values()[static_cast<std::size_t>(r->id)]).toTensor();
      p_.conversion_cost_table.push_back(
          measureConversionCost(tensor, "model", o_.warmup, o_.repeats, db_.get()));
      progress_.tick(++done);
    }
    if (db_)
      db_->commit();
  }

  void measureSweep() {
    const std::int64_t max_bytes =
        o_.sweep_max_bytes > 0 ? o_.sweep_max_bytes : defaultSweepMaxBytes();
    auto layouts = sweepLayouts(static_cast<std::uint64_t>(o_.seed) + 1, o_.sweep_count, max_bytes);
    std::set<std::string> seen;
    for (const auto& c : p_.conversion_cost_table)
      seen.insert(c.key());
    PassOptions po;
    po.passes = kSweepPasses;
    po.wanted = [&](const formats::Layout& l) { // the model's layouts are measured already
      return seen.insert(l.key()).second;
    };
    po.counts = [&](const at::Tensor& t) {
      // Large copies are stable after a few samples; small ones need the full count.
      const bool large =
          t.numel() * static_cast<std::int64_t>(t.element_size()) > (std::int64_t{16} << 20);
      return std::pair<int, int>{large ? 1 : o_.warmup,
                                 large ? std::min(o_.repeats, 6) : o_.repeats};
    };
    po.tick = [&](std::size_t done) {
      progress_.tick(done);
      if (db_ && done % 32 == 0)
        db_->commit();
    };
    progress_.phase("sweeping layouts", layouts.size() * static_cast<std::size_t>(po.passes));
    auto costs = measureInPasses(
        layouts.size(), [&](std::size_t i) { return layouts[i].materialize(); }, po, db_.get());
    for (auto& c : costs)
      p_.conversion_cost_table.push_back(std::move(c));
    if (db_)
      db_->commit();
  }

  void measureConsumers(const GraphRunner::Trace& t) {
    measureRecordConsumers(
        p_.records, {*runner_, *index_, t, db_.get(), o_.warmup, o_.repeats, &exposed_}, progress_);
  }

  const ProfileOptions& o_;
  Progress progress_;
  formats::Profile p_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::vector<tspass::ExposedLinear> exposed_;
  std::unique_ptr<tspass::GraphIndex> index_;
  std::unique_ptr<GraphRunner> runner_;
  std::unique_ptr<TimingDb> db_;
  std::string db_device_, db_library_; // its scope (xprof's launcher reads the profile there)
  std::vector<c10::IValue> inputs_;
  std::string input_file_sha256_; // "" without --input-file
  std::vector<OpTiming> timeline_;
};

} // namespace

formats::Profile profileModel(const ProfileOptions& options) {
  return Profiler(options).run();
}

} // namespace xalloc::profiler
