// The profiler runs the graph: whole runs, the inputs of one op, and each op timed (from the
// database when every op is there), then the timeline run.
#include "profiler_impl.h"

namespace xalloc::profiler::detail {

void Profiler::runModel(const GraphRunner::Options& options, GraphRunner::Trace* trace) {
  try {
    runner_->run(inputs_, options, trace);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(o_.model, "the model failed on the example inputs: " + firstLine(e.what()));
  }
}

std::vector<c10::IValue> Profiler::inputsOf(const Node* n, const GraphRunner::Trace& t) const {
  std::vector<c10::IValue> in;
  for (const Value* v : n->inputs()) {
    if (!runner_->hasValue(t, v))
      return {};
    in.push_back(runner_->valueOf(t, v));
  }
  return in;
}

void Profiler::timeOps(const GraphRunner::Trace& capture) {
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
  std::optional<GraphRunner::Trace> timeline; // the last timed run's, for a slow model
  if (complete) {
    for (std::size_t i = 0; i < n; ++i)
      if (cached[i])
        stats[i] = cached[i]->stats;
  } else {
    // The first warm-up run's time scales the counts down for a slow model (budgetedCounts).
    // Under --budget, a model whose first (capturing) run took over a second has warmed up:
    // its time scales the counts, two repeats at least (one for a model so slow that two
    // would take the whole share: a video transformer's 6 s).
    Counts runs{o_.warmup, o_.iterations};
    const double share =
        std::min(kModelBudgetMs, o_.budget_s > 0 ? kOpShare * o_.budget_s * 1e3 : kModelBudgetMs);
    if (o_.budget_s > 0 && capture_ms_ > kSlowRoundMs)
      runs = budgetedCounts(capture_ms_, 0, o_.iterations, share, 2 * capture_ms_ > share ? 1 : 2);
    progress_.phase("timing ops", static_cast<std::size_t>(runs.warmup + runs.repeats));
    if (runs.warmup > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      runModel({}, nullptr);
      runs = budgetedCounts(msSince(t0), o_.warmup, o_.iterations, share, 3);
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
      // A model slow enough to be timed fewer times than asked gives its last timed run as the
      // timeline too (process CPU time per op read as well: a few microseconds per op).
      const bool as_timeline = runs.repeats < o_.iterations && it + 1 == runs.repeats;
      runModel({false, /*time_ops=*/true, /*cpu_time=*/as_timeline}, &t);
      if (as_timeline)
        timeline = t;
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
  if (timeline) {
    line = std::move(*timeline);
    if (db_)
      storeTimeline(line_key, line);
  } else if (!(complete && loadTimeline(line_key, n, line))) {
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

std::map<std::string, std::vector<std::size_t>>
Profiler::groupByKey(const std::vector<std::string>& keys) {
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (!keys[i].empty())
      groups[keys[i]].push_back(i);
  return groups;
}

// What the ops' times leave out is the model's as much as they are: TorchScript's interpreter
// between the ops and, larger, the allocator's first touches. glibc's malloc maps each large
// block fresh and gives it back (or trims the heap's top), so an op that allocates megabytes
// faults in their pages every call; each op timed alone reuses one block. On this project's
// VMs (paravirtualized) a fault costs tens of microseconds: the frozen SmallCNN sample's ops
// summed 7 ms and it ran 30-90 ms (9.8 with malloc's thresholds pinned). Timed first, before
// xprof pins malloc's thresholds for its measurements (steadyStateMalloc) and fills the heap
// with what a user's process does not hold (timed after, SmallCNN ran 6.6 ms). Two untimed calls
// (the profiling executor's), then the median of max(3, --iterations), within a tenth of
// --budget; none for a model that fails called whole (its plan predicts from the ops' sum).
void Profiler::timeWholeRun(torch::jit::Module& module) {
  const double allowance_ms = o_.budget_s > 0 ? 0.1 * o_.budget_s * 1e3 : -1;
  const auto start = std::chrono::steady_clock::now();
  try {
    at::NoGradGuard no_grad;
    auto method = module.get_method(o_.method);
    // Copies of the tensor inputs: a model that writes its input in place changes only these.
    std::vector<c10::IValue> args;
    for (auto it = inputs_.begin() + 1; it != inputs_.end(); ++it)
      args.push_back(it->isTensor() ? c10::IValue(it->toTensor().clone()) : *it);
    const int timed = std::max(3, o_.iterations);
    std::vector<double> ms; // reserved: no block of ours lands on the heap's top between calls
    ms.reserve(static_cast<std::size_t>(timed));
    for (int i = 0; i < 2 + timed; ++i) {
      if (allowance_ms >= 0 && msSince(start) > allowance_ms)
        break;
      const auto t0 = std::chrono::steady_clock::now();
      method(args);
      if (i >= 2)
        ms.push_back(msSince(t0));
    }
    if (ms.size() >= 3)
      p_.settings.model_run_ms = summarize(std::move(ms)).median_ms;
  } catch (const std::exception&) {
    p_.settings.model_run_ms = 0;
  }
}

} // namespace xalloc::profiler::detail
