// measureProducerFusion: for a non-contiguous value made by a pointwise op, the op and a
// conversion after it against the op writing a row-major buffer itself (ProducerFusion).
#include <torch/csrc/jit/runtime/operator.h>

#include "profiler_impl.h"
#include "xalloc/tspass/producer_fusion.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::profiler::detail {

namespace {

// The producer's input the row-major buffer is made like: a tensor with the output's sizes,
// dtype and device (a broadcast operand has other sizes; a promoted one another dtype).
std::optional<std::size_t> templateInput(const torch::jit::Stack& inputs, const at::Tensor& out) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor())
      continue;
    const at::Tensor& t = inputs[i].toTensor();
    if (t.defined() && t.sizes() == out.sizes() && t.scalar_type() == out.scalar_type() &&
        t.device() == out.device())
      return i;
  }
  return std::nullopt;
}

} // namespace

void Profiler::measureProducerFusion(const GraphRunner::Trace& t) {
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < p_.records.size(); ++i) {
    const formats::Record& r = p_.records[i];
    if (!r.contiguous && r.producer_op && !r.consumers.empty() && !r.has_writers)
      candidates.push_back(i);
  }
  progress_.phase("timing conversions fused into producers", candidates.size());
  std::size_t done = 0;
  for (std::size_t i : candidates) {
    progress_.tick(++done);
    if (pastBudget(kEarlyShare))
      break; // a producer not timed keeps writing what it writes
    formats::Record& r = p_.records[i];
    const Value* v = index_->values()[static_cast<std::size_t>(r.id)];
    const Node* producer = v->node();
    auto op = tspass::outVariantOf(producer);
    if (!op || !GraphRunner::canRunInIsolation(producer) || !runner_->hasValue(t, v))
      continue;
    torch::jit::Stack inputs;
    bool all = true;
    for (const Value* in : producer->inputs()) {
      if (!runner_->hasValue(t, in)) {
        all = false;
        break;
      }
      inputs.push_back(runner_->valueOf(t, in));
    }
    const c10::IValue& made = runner_->valueOf(t, v);
    if (!all || !made.isTensor())
      continue;
    auto tmpl = templateInput(inputs, made.toTensor());
    if (!tmpl)
      continue;
    const at::Tensor like = inputs[*tmpl].toTensor();
    auto separate = [&] {
      auto out = runner_->runOp(producer, inputs);
      return out.at(0).toTensor().contiguous();
    };
    auto fused = [&] {
      torch::jit::Stack s = inputs;
      s.emplace_back(at::empty_like(like, at::MemoryFormat::Contiguous));
      op->getOperation()(s);
      return s.back().toTensor();
    };
    at::Tensor a, b;
    double pair_ms = 0;
    try {
      const auto t0 = std::chrono::steady_clock::now();
      a = separate();
      b = fused();
      pair_ms = msSince(t0);
    } catch (const std::exception&) {
      continue; // an op whose out variant refuses these arguments: nothing to measure
    }
    if (!b.is_contiguous() || b.sizes() != a.sizes())
      continue;
    formats::ProducerFusion f;
    f.op = tspass::operatorName(*op);
    f.template_input = static_cast<std::int64_t>(*tmpl);
    f.identical_output = tspass::bitwiseEqual(c10::IValue(a), c10::IValue(b));
    if (!f.identical_output) {
      const double e = tspass::maxRelativeError(c10::IValue(a), c10::IValue(b));
      if (!std::isfinite(e))
        continue; // unbounded: fits no tolerance
      f.output_error = e;
    }
    const Counts n = budgetedCounts(pair_ms, o_.warmup, o_.repeats, kPairBudgetMs, 5);
    const PairedTiming m =
        timeInterleaved([&] { (void)separate(); }, [&] { (void)fused(); }, n.warmup, n.repeats);
    f.separate_ms = m.a.median_ms;
    f.separate_spread_ms = m.a.iqr_ms;
    f.fused_ms = m.b.median_ms;
    f.fused_spread_ms = m.b.iqr_ms;
    f.delta_ms = m.delta.median_ms;
    f.delta_spread_ms = m.delta.iqr_ms;
    r.producer_fusion = std::move(f);
  }
}

} // namespace xalloc::profiler::detail
