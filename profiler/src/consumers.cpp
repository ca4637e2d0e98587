// measureConsumer: one consumer of a value re-run in isolation with the value as it is and
// with another layout, interleaved, with its outputs compared bit for bit.
#include "xalloc/profiler/consumers.h"

#include <chrono>
#include <set>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/formats/op_facts.h"
#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/signature.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::profiler {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// Ops that look at a tensor's metadata and never at its elements (formats/op_facts.h): no
// layout can make them faster, so they are not re-run.
bool readsOnlyMetadata(const Node* n) {
  return formats::readsNoElements(n->kind().toQualString());
}

// The op that really reads a value: the consumer itself, or, when the consumer only builds a
// list or tuple (torch.cat([a, b])), the one op that reads that list.
const Node* readerOf(const Node* user, std::string* via) {
  if (user->kind() != c10::prim::ListConstruct && user->kind() != c10::prim::TupleConstruct)
    return user;
  const auto& uses = user->output()->uses();
  if (uses.size() != 1)
    return nullptr;
  *via = std::string("measured through ") + user->kind().toQualString();
  return uses.front().user;
}

// An exposed linear as the rewrite runs it: `aten::linear` itself (the weight is `wt.t()`, the
// very view of W the model passes) unless its transposed weight was converted.
at::Tensor runLinear(const at::Tensor& x, const at::Tensor& wt, const at::Tensor& bias,
                     bool weight_converted) {
  if (!weight_converted)
    return at::linear(x, wt.t(), bias);
  at::Tensor y = at::matmul(x, wt);
  return bias.defined() ? at::add(y, bias) : y;
}

} // namespace

namespace {

// How many levels of consumers whose output layout changes are followed downstream.
constexpr int kDownstreamDepth = 3;

// measureConsumer for one consumer; `swapped_out` gets the reader's outputs with `other` when
// they have another layout than as it is (then what runs after the reader is measured too).
bool measureOne(const ConsumerContext& ctx, const Value* v, const at::Tensor& other,
                bool to_contiguous, formats::ConsumerTiming& c,
                std::vector<c10::IValue>* swapped_out, const Node** reader_out) {
  const GraphRunner& runner = ctx.runner;
  const GraphRunner::Trace& t = ctx.trace;
  const Node* user = ctx.index.ops()[static_cast<std::size_t>(c.op_id)];
  if (readsOnlyMetadata(user)) {
    c.note = "reads only sizes or flags, not the data; not re-run";
    return false;
  }
  std::string via;
  const Node* reader = readerOf(user, &via);
  if (!reader) {
    c.note =
        std::string("builds a ") + user->kind().toQualString() + " read by several ops; not re-run";
    return false;
  }
  if (!GraphRunner::canRunInIsolation(reader)) {
    c.note = reader->kind().ns() == c10::namespaces::prim
                 ? "an instruction of the interpreter, not an op; not re-run in isolation"
                 : "mutates an input or has side effects; not re-run";
    return false;
  }
  for (const Node* n : {user, reader})
    for (const Value* in : n->inputs())
      if (!runner.hasValue(t, in)) {
        c.note = "not executed with the example inputs (a branch not taken)";
        return false;
      }
  // The reader's inputs with v replaced by `x` (inside the list when the reader takes a list):
  // as they were with v itself, and swapped with the other layout.
  auto stackWith = [&](const at::Tensor& x, std::string* swap_at) {
    torch::jit::Stack stack;
    for (std::size_t i = 0; i < reader->inputs().size(); ++i) {
      const Value* in = reader->input(i);
      if (in == v) {
        stack.push_back(c10::IValue(x));
        if (swap_at)
          *swap_at += std::to_string(i) + ",";
      } else if (reader != user && in == user->output()) {
        std::vector<c10::IValue> elems;
        for (std::size_t k = 0; k < user->inputs().size(); ++k) {
          const Value* e = user->input(k);
          elems.push_back(e == v ? c10::IValue(x) : runner.valueOf(t, e));
          if (e == v && swap_at)
            *swap_at += std::to_string(i) + "." + std::to_string(k) + ",";
        }
        if (user->kind() == c10::prim::TupleConstruct) {
          stack.emplace_back(c10::ivalue::Tuple::create(std::move(elems)));
        } else {
          c10::impl::GenericList list(
              user->output()->type()->expectRef<c10::ListType>().getElementType());
          for (auto& e : elems)
            list.push_back(std::move(e));
          stack.emplace_back(std::move(list));
        }
      } else {
        stack.push_back(runner.valueOf(t, in));
      }
    }
    return stack;
  };
  const at::Tensor& value = runner.valueOf(t, v).toTensor();
  std::string swap_at;
  const torch::jit::Stack as_is = stackWith(value, nullptr);
  const torch::jit::Stack swapped = stackWith(other, &swap_at);
  const tspass::ExposedLinear* exposed =
      ctx.exposed ? tspass::findExposed(*ctx.exposed, reader) : nullptr;
  const bool linear = exposed != nullptr;
  const Value* bias = linear && exposed->add ? exposed->bias : nullptr;
  const bool weight_converted = linear && v == reader->input(1);
  auto run = [&](bool swap) {
    const torch::jit::Stack& s = swap ? swapped : as_is;
    if (!linear)
      return runner.runOp(reader, s);
    return std::vector<c10::IValue>{runLinear(
        s[0].toTensor(), s[1].toTensor(), bias ? runner.valueOf(t, bias).toTensor() : at::Tensor(),
        swap && weight_converted)};
  };
  // compareLayouts runs each layout once: that pair's time sets how often a slow consumer is
  // timed (budgetedCounts).
  double pair_ms = 0;
  auto timed = [&](bool swap) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = run(swap);
    pair_ms += msSince(t0);
    return out;
  };
  if (!compareLayouts(timed, to_contiguous, c, swapped_out))
    return false;
  if (!c.same_output_layout)
    *reader_out = reader;
  // Correctness is checked on every run; only the timings come from the database.
  const std::string key = "consumer|" + opSignature(reader, as_is) + (linear ? "|linear" : "") +
                          "|swap:" + swap_at + "|" + layoutSignature(other) +
                          repeatsTag(ctx.warmup, ctx.repeats);
  auto hit =
      ctx.db && !ctx.again ? ctx.db->getAll({key + "|a", key + "|b", key + "|d"}) : std::nullopt;
  PairedTiming m;
  if (hit) {
    m = {(*hit)[0].stats, (*hit)[1].stats, (*hit)[2].stats};
  } else {
    const Counts n = budgetedCounts(pair_ms, ctx.warmup, ctx.repeats, kPairBudgetMs, 5);
    m = timeInterleaved([&] { (void)run(false); }, [&] { (void)run(true); }, n.warmup, n.repeats);
    if (ctx.again && c.measured && c.time_as_is_ms > 0 && m.a.median_ms > 0 &&
        c.delta_spread_ms.value_or(0) / c.time_as_is_ms <= m.delta.iqr_ms / m.a.median_ms)
      return true; // no quieter than before: the first timings stand
    if (ctx.db) {
      ctx.db->put(key + "|a", {m.a, 0});
      ctx.db->put(key + "|b", {m.b, 0});
      ctx.db->put(key + "|d", {m.delta, 0});
    }
  }
  setTimings(m, to_contiguous, c);
  c.note = via;
  return !hit;
}

bool measureFollowing(const ConsumerContext& ctx, const Value* v, const at::Tensor& other,
                      bool to_contiguous, formats::ConsumerTiming& c, int depth) {
  std::vector<c10::IValue> swapped;
  const Node* reader = nullptr;
  const bool now = measureOne(ctx, v, other, to_contiguous, c, &swapped, &reader);
  if (ctx.again || !reader || depth >= kDownstreamDepth)
    return now;
  // The reader's output has another layout: each of its consumers re-run with the output the
  // other layout gives, and so on while outputs keep changing layout.
  c.downstream.clear();
  for (std::size_t k = 0; k < reader->outputs().size() && k < swapped.size(); ++k) {
    const Value* out = reader->output(k);
    if (!swapped[k].isTensor() || !ctx.runner.hasValue(ctx.trace, out))
      continue;
    const at::IValue& as_is = ctx.runner.valueOf(ctx.trace, out);
    if (!as_is.isTensor() || tspass::sameLayout({as_is}, {swapped[k]}))
      continue;
    for (const torch::jit::Use& use : out->uses()) {
      const std::int64_t id = ctx.index.opId(use.user);
      if (id < 0)
        continue; // the graph's return
      formats::ConsumerTiming d;
      d.op_id = id;
      d.input_index = static_cast<std::int64_t>(use.offset);
      (void)measureFollowing(ctx, out, swapped[k].toTensor(), to_contiguous, d, depth + 1);
      c.downstream.push_back(std::move(d));
    }
  }
  return now;
}

} // namespace

bool measureConsumer(const ConsumerContext& ctx, const Value* v, const at::Tensor& other,
                     bool to_contiguous, formats::ConsumerTiming& c) {
  return measureFollowing(ctx, v, other, to_contiguous, c, 0);
}

void measureRecordConsumers(std::vector<formats::Record>& records, const ConsumerContext& ctx,
                            Progress& progress) {
  // The value's other layout, or an undefined tensor when its consumers need no timing.
  auto otherOf = [&](const formats::Record& r, const Value* v, bool* to_contiguous) {
    const at::Tensor& tensor = ctx.runner.valueOf(ctx.trace, v).toTensor();
    *to_contiguous = !r.contiguous;
    if (!r.contiguous)
      return tensor.contiguous();
    if (v->node()->kind() == c10::aten::contiguous) {
      const at::Tensor& src = ctx.runner.valueOf(ctx.trace, v->node()->input(0)).toTensor();
      if (!src.is_contiguous())
        return src;
    }
    return at::Tensor(); // contiguous already, or a no-op conversion's: nothing else to compare
  };
  std::size_t total = 0;
  for (const formats::Record& r : records)
    total += r.consumers.size();
  progress.phase("re-running consumers", total);
  std::size_t done = 0;
  std::vector<std::pair<std::size_t, std::size_t>> again; // (record, consumer) disturbed
  for (std::size_t i = 0; i < records.size(); ++i) {
    formats::Record& r = records[i];
    const Value* v = ctx.index.values()[static_cast<std::size_t>(r.id)];
    bool to_contiguous = false;
    const at::Tensor other = otherOf(r, v, &to_contiguous);
    for (std::size_t k = 0; k < r.consumers.size(); ++k) {
      if (other.defined() && ctx.out_of_time && ctx.out_of_time()) {
        r.consumers[k].note = kBudgetSpent;
        progress.tick(++done);
        continue;
      }
      if (other.defined() && measureConsumer(ctx, v, other, to_contiguous, r.consumers[k]) &&
          disturbed(r.consumers[k]))
        again.emplace_back(i, k);
      progress.tick(++done);
    }
    if (ctx.db)
      ctx.db->commit();
  }
  if (again.empty())
    return;
  progress.phase("measuring disturbed consumers again", again.size());
  ConsumerContext second = ctx;
  second.again = true;
  done = 0;
  for (const auto& [i, k] : again) {
    if (ctx.out_of_time && ctx.out_of_time())
      break; // the first timings stand
    formats::Record& r = records[i];
    const Value* v = ctx.index.values()[static_cast<std::size_t>(r.id)];
    bool to_contiguous = false;
    const at::Tensor other = otherOf(r, v, &to_contiguous);
    (void)measureConsumer(second, v, other, to_contiguous, r.consumers[k]);
    progress.tick(++done);
  }
  if (ctx.db)
    ctx.db->commit();
}

} // namespace xalloc::profiler
