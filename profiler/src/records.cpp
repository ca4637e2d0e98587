// The profiler's records: every tensor value with its layout, origin and lifetime, the
// conversions measured, the sweep, and each consumer re-run with both layouts.
#include "profiler_impl.h"

namespace xalloc::profiler::detail {

namespace {
// A copy large enough to be stable after a few samples (small ones need the full count).
bool largeCopy(const at::Tensor& t) {
  return t.nbytes() > (std::size_t{16} << 20);
}
} // namespace

void Profiler::buildRecords(const GraphRunner::Trace& t, const tspass::MutationInfo& mutation) {
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
    // An undefined tensor (an optional output not computed, such as the attention weights of
    // nn.MultiheadAttention's fused path) is no value: nothing to lay out or convert.
    if (it == t.values.end() || !it->second.isTensor() || !it->second.toTensor().defined())
      continue;
    const at::Tensor& tensor = it->second.toTensor();
    Record r;
    r.id = static_cast<std::int64_t>(id);
    r.name = v->debugName();
    const Node* p = v->node();
    if (p->kind() == c10::prim::Param) {
      r.origin = formats::Origin::Input;
      r.first_use = 0;
      if (p->owningBlock() != graph_->block()) {
        // A loop body's block input: it changes every trip and has no node of its own.
        r.producer_op = index_->opId(p->owningBlock()->owningNode());
        r.output_index = static_cast<std::int64_t>(v->offset());
        r.origin = formats::Origin::LoopCarried;
        r.in_loop = true;
      }
    } else {
      r.producer_op = index_->opId(p);
      r.output_index = static_cast<std::int64_t>(v->offset());
      r.origin = p->kind() == c10::prim::GetAttr ? formats::Origin::Attribute
                 : tspass::isConstantTensor(v)   ? formats::Origin::Constant
                                                 : formats::Origin::Op;
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
  // An op's inputs and outputs name records: values never made (a branch not taken) have none.
  std::set<std::int64_t> recorded;
  for (const Record& r : p_.records)
    recorded.insert(r.id);
  for (formats::Op& op : p_.ops)
    for (auto* ids : {&op.inputs, &op.outputs})
      ids->erase(std::remove_if(ids->begin(), ids->end(),
                                [&](std::int64_t id) { return !recorded.count(id); }),
                 ids->end());
}

void Profiler::measureConversions(const GraphRunner::Trace& t) {
  std::map<std::string, const Record*> todo;
  // A value computed from constants alone (a frozen linear's transposed weight) is converted
  // once, into the model, when its consumers gain: xsched prices it at zero, so it is not timed
  // (VGG's 411 MB classifier weight took 30 s to time here, most of it page faults).
  for (const Record& r : p_.records)
    if (!r.contiguous && r.layout.numel() > 0 && r.origin != formats::Origin::Constant)
      todo.emplace(r.layout.key(), &r);
  progress_.phase("measuring conversions", todo.size());
  std::size_t done = 0;
  for (const auto& [key, r] : todo) {
    if (pastBudget(kEarlyShare))
      break; // a conversion not measured is priced by the cost model
    const at::Tensor& tensor =
        runner_->valueOf(t, index_->values()[static_cast<std::size_t>(r->id)]).toTensor();
    // A large copy: one warm-up, one repeat per placement.
    const bool large = largeCopy(tensor);
    p_.conversion_cost_table.push_back(measureConversionCost(tensor, "model", large ? 1 : o_.warmup,
                                                             large ? 3 : o_.repeats, db_.get()));
    progress_.tick(++done);
  }
  if (db_)
    db_->commit();
}

void Profiler::measureSweep() {
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
    const bool large = largeCopy(t);
    return std::pair<int, int>{large ? 1 : o_.warmup, large ? std::min(o_.repeats, 6) : o_.repeats};
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
  // The same 4-D layouts converted to channels-last (a region's entry conversion), so xcost fits
  // and scores that target too.
  std::vector<std::size_t> four_d;
  for (std::size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i].base_shape.size() == 4)
      four_d.push_back(i);
  PassOptions cl = po;
  cl.target = formats::LayoutTarget::ChannelsLast;
  cl.wanted = [&](const formats::Layout& l) {
    formats::ConversionCost probe;
    probe.layout = l;
    probe.target = cl.target;
    return seen.insert(probe.key()).second;
  };
  progress_.phase("sweeping layouts to channels-last",
                  four_d.size() * static_cast<std::size_t>(cl.passes));
  auto cl_costs = measureInPasses(
      four_d.size(), [&](std::size_t i) { return layouts[four_d[i]].materialize(); }, cl,
      db_.get());
  for (auto& c : cl_costs)
    p_.conversion_cost_table.push_back(std::move(c));
  if (db_)
    db_->commit();
}

void Profiler::measureConsumers(const GraphRunner::Trace& t) {
  ConsumerContext ctx{*runner_, *index_, t, db_.get(), o_.warmup, o_.repeats, &exposed_};
  ctx.out_of_time = [this] {
    return pastBudget(kEarlyShare);
  };
  measureRecordConsumers(p_.records, ctx, progress_);
}

} // namespace xalloc::profiler::detail
