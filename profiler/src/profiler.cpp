// profileModel: op timings, value records with layouts and lifetimes, conversion costs, and
// consumer re-runs with both layouts.
#include "xalloc/profiler/profiler.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/inputs.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/value_compare.h"
#include "xalloc/torch_compat.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/mutation.h"
#include "xalloc/version.h"

namespace xalloc::profiler {

using formats::Record;
using torch::jit::Node;
using torch::jit::Value;

namespace {

formats::Layout layoutOf(const at::Tensor& t) {
  formats::Layout l;
  l.sizes = t.sizes().vec();
  l.strides = t.strides().vec();
  l.storage_offset = t.storage_offset();
  l.dtype = compat::dtypeName(t.scalar_type());
  l.device = t.device().is_cpu() ? "cpu" : t.device().str();
  return l;
}

const c10::StorageImpl* storageOf(const at::Tensor& t) {
  return t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
}

class Profiler {
public:
  explicit Profiler(const ProfileOptions& o) : o_(o) {}

  formats::Profile run() {
    if (o_.iterations < 1 || o_.repeats < 1 || o_.warmup < 0)
      throw InputError("xprof", "--iterations and --repeats must be at least 1");
    if (o_.threads > 0)
      at::set_num_threads(o_.threads);
    tspass::LoadedModel model = tspass::loadModel(o_.model);
    p_.tool_version = kVersion;
    p_.model.path = o_.model;
    p_.model.sha256 = model.sha256;
    p_.model.format = "torchscript";
    p_.model.method = o_.method;

    auto specs = o_.inputs.empty() ? specFromExtraFiles(model.extra_files, o_.model) : o_.inputs;
    p_.settings = {o_.iterations, o_.warmup, o_.repeats, o_.seed, specs};
    auto method = model.module.find_method(o_.method);
    if (!method)
      throw InputError(o_.model, "the model has no method '" + o_.method + "'");
    // Profile an inlined copy: the module's own graph stays untouched.
    graph_ = method->graph()->copy();
    torch::jit::Inline(*graph_);
    index_ = std::make_unique<tspass::GraphIndex>(*graph_);
    tspass::MutationInfo mutation(graph_);
    runner_ = std::make_unique<GraphRunner>(*index_);
    inputs_ = methodInputs(model.module, o_.method,
                           makeInputs(specs, static_cast<std::uint64_t>(o_.seed)), o_.model);

    p_.device = describeCpu();
    timeOps();
    GraphRunner::Trace capture;
    runModel({/*keep_values=*/true, false, false}, &capture);
    buildRecords(capture, mutation);
    measureConversions(capture);
    if (o_.measure_consumers)
      measureConsumers(capture);
    return std::move(p_);
  }

private:
  // One run of the whole graph; a failure of the model itself becomes a clear InputError.
  void runModel(const GraphRunner::Options& options, GraphRunner::Trace* trace) {
    try {
      runner_->run(inputs_, options, trace);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw InputError(o_.model, "the model failed on the example inputs: " +
                                     what.substr(0, what.find('\n')));
    }
  }

  // Whole-graph runs: warm-up, then per-op wall times (median over iterations) and one run with
  // process CPU time per op for utilization.
  void timeOps() {
    const std::size_t n = index_->ops().size();
    for (int i = 0; i < o_.warmup; ++i)
      runModel({}, nullptr);
    std::vector<std::vector<double>> samples(n);
    GraphRunner::Trace t;
    for (int it = 0; it < o_.iterations; ++it) {
      runModel({false, /*time_ops=*/true, false}, &t);
      for (std::size_t i = 0; i < n; ++i)
        samples[i].push_back(t.op_ms[i]);
    }
    GraphRunner::Trace cpu;
    runModel({false, true, /*cpu_time=*/true}, &cpu);
    const double cores = static_cast<double>(p_.device.cores);
    for (std::size_t i = 0; i < n; ++i) {
      const Node* node = index_->ops()[i];
      formats::Op op;
      op.id = static_cast<std::int64_t>(i);
      op.kind = node->kind().toQualString();
      op.source = index_->source(op.id).loc;
      op.anchor = index_->anchor(op.id);
      op.scope = index_->scope(op.id);
      TimingStats s = summarize(samples[i]);
      op.duration_ms = s.median_ms;
      op.duration_spread_ms = s.iqr_ms;
      op.utilization = cpu.op_ms[i] > 0.001
                           ? std::clamp(cpu.op_cpu_ms[i] / (cpu.op_ms[i] * cores), 0.0, 1.0)
                           : 0.0;
      for (const Value* v : node->inputs())
        if (v->type()->cast<c10::TensorType>() && index_->valueId(v) >= 0)
          op.inputs.push_back(index_->valueId(v));
      for (const Value* v : node->outputs())
        if (v->type()->cast<c10::TensorType>())
          op.outputs.push_back(index_->valueId(v));
      p_.ops.push_back(std::move(op));
    }
  }

  std::vector<std::string> viewChain(const Value* v, const GraphRunner::Trace& t) const {
    std::vector<std::string> chain;
    const Value* cur = v;
    for (int depth = 0; depth < 16; ++depth) {
      auto it = t.values.find(cur);
      if (it == t.values.end() || !it->second.isTensor())
        break;
      const c10::StorageImpl* storage = storageOf(it->second.toTensor());
      const Node* p = cur->node();
      const Node* reads = p;
      if (p->kind() == c10::prim::ListUnpack)
        reads = p->input(0)->node(); // x.split(...) -> ListUnpack: the view op is the split
      if (reads->kind() == c10::prim::Param || reads->kind() == c10::prim::GetAttr)
        break;
      const Value* base = nullptr;
      for (const Value* in : reads->inputs()) {
        auto jt = t.values.find(in);
        if (jt != t.values.end() && jt->second.isTensor() &&
            storageOf(jt->second.toTensor()) == storage) {
          base = in;
          break;
        }
      }
      if (!base)
        break;
      chain.push_back(reads->kind().toQualString());
      cur = base;
    }
    std::reverse(chain.begin(), chain.end());
    return chain;
  }

  void buildRecords(const GraphRunner::Trace& t, const tspass::MutationInfo& mutation) {
    const auto last_op = static_cast<std::int64_t>(index_->ops().size()) - 1;
    std::set<const Value*> outputs(graph_->outputs().begin(), graph_->outputs().end());
    // A tuple output's elements are outputs too.
    for (const Value* o : graph_->outputs())
      if (o->node()->kind() == c10::prim::TupleConstruct)
        outputs.insert(o->node()->inputs().begin(), o->node()->inputs().end());
    std::map<const c10::StorageImpl*, std::int64_t> storage_ids;
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
        r.origin = p->kind() == c10::prim::GetAttr ? "attribute" : "op";
        r.first_use = *r.producer_op;
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
    std::map<std::string, formats::ConversionCost> table;
    for (const Record& r : p_.records) {
      if (r.contiguous || r.layout.numel() == 0 || table.count(r.layout.key()))
        continue;
      const at::Tensor& tensor = runner_->valueOf(t, index_->values()[r.id]).toTensor();
      TimingStats s = timeRepeated([&] { (void)tensor.contiguous(); }, o_.warmup, o_.repeats);
      formats::ConversionCost c;
      c.layout = r.layout;
      c.samples_ms = s.samples_ms;
      c.median_ms = s.median_ms;
      c.spread_ms = s.iqr_ms;
      table.emplace(r.layout.key(), std::move(c));
    }
    for (auto& [key, c] : table)
      p_.conversion_cost_table.push_back(std::move(c));
  }

  // Re-runs each consumer of a value in isolation with the value as it is and with the other
  // layout: made contiguous for a non-contiguous value; for the output of an existing
  // aten::contiguous, the conversion's (non-contiguous) input instead.
  void measureConsumers(const GraphRunner::Trace& t) {
    for (Record& r : p_.records) {
      const Value* v = index_->values()[r.id];
      const at::Tensor& tensor = runner_->valueOf(t, v).toTensor();
      at::Tensor other;
      bool to_contiguous = false;
      if (!r.contiguous) {
        other = tensor.contiguous();
        to_contiguous = true;
      } else if (v->node()->kind() == c10::aten::contiguous) {
        const at::Tensor& src = runner_->valueOf(t, v->node()->input(0)).toTensor();
        if (src.is_contiguous())
          continue; // a no-op conversion: consumers see the very same tensor
        other = src;
      } else {
        continue;
      }
      for (auto& c : r.consumers)
        measureConsumer(t, v, other, to_contiguous, c);
    }
  }

  void measureConsumer(const GraphRunner::Trace& t, const Value* v, const at::Tensor& other,
                       bool to_contiguous, formats::ConsumerTiming& c) {
    const Node* user = index_->ops()[static_cast<std::size_t>(c.op_id)];
    if (!GraphRunner::canRunInIsolation(user)) {
      c.note = user->kind().ns() == c10::namespaces::aten
                   ? "mutates an input or has side effects; not re-run"
                   : "not an aten op; not re-run in isolation";
      return;
    }
    for (const Value* in : user->inputs())
      if (!runner_->hasValue(t, in)) {
        c.note = "not executed with the example inputs (a branch not taken)";
        return;
      }
    torch::jit::Stack as_is, swapped;
    for (const Value* in : user->inputs()) {
      as_is.push_back(runner_->valueOf(t, in));
      swapped.push_back(in == v ? c10::IValue(other) : as_is.back());
    }
    std::vector<c10::IValue> out_a, out_b;
    try {
      out_a = runner_->runOp(user, as_is);
    } catch (const std::exception&) {
      c.note = "failed when re-run in isolation";
      return;
    }
    try {
      out_b = runner_->runOp(user, swapped);
    } catch (const std::exception&) {
      if (to_contiguous) {
        c.note = "failed with a contiguous input";
      } else {
        c.accepts_noncontiguous = false;
        c.note = "refuses a non-contiguous input";
      }
      return;
    }
    c.identical_output = bitwiseEqual(out_a, out_b);
    c.same_output_layout = sameLayout(out_a, out_b);
    auto [a, b] =
        timeInterleaved([&] { (void)runner_->runOp(user, as_is); },
                        [&] { (void)runner_->runOp(user, swapped); }, o_.warmup, o_.repeats);
    c.measured = true;
    c.time_as_is_ms = a.median_ms;
    c.time_as_is_spread_ms = a.iqr_ms;
    if (to_contiguous) {
      c.time_contiguous_ms = b.median_ms;
      c.time_contiguous_spread_ms = b.iqr_ms;
    } else {
      c.time_noncontiguous_ms = b.median_ms;
      c.time_noncontiguous_spread_ms = b.iqr_ms;
    }
  }

  const ProfileOptions& o_;
  formats::Profile p_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::unique_ptr<tspass::GraphIndex> index_;
  std::unique_ptr<GraphRunner> runner_;
  std::vector<c10::IValue> inputs_;
};

} // namespace

formats::Profile profileModel(const ProfileOptions& options) {
  return Profiler(options).run();
}

} // namespace xalloc::profiler
