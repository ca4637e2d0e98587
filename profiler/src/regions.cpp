// Layout regions measured: the model frozen (a copy, as xrewrite --freeze freezes it), its
// regions found, and each run in isolation on the values the real inputs give it, as it is and
// in every candidate layout (the same rewrite xrewrite writes, boundary conversions included),
// interleaved round by round so drift hits every candidate alike.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include <torch/csrc/jit/api/function_impl.h>

#include "profiler_impl.h"
#include "region_twins.h"
#include "xalloc/profiler/consumers.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::profiler::detail {

namespace {

// One way of running a region, ready to time.
struct Runnable {
  std::unique_ptr<torch::jit::GraphFunction> fn;
  std::vector<c10::IValue> inputs;  // the region's inputs as this candidate gets them
  std::vector<c10::IValue> outputs; // of its first run
  std::vector<double> samples, deltas;
};

std::vector<c10::IValue> runOnce(torch::jit::GraphFunction& fn,
                                 const std::vector<c10::IValue>& inputs) {
  torch::jit::Stack s(inputs.begin(), inputs.end());
  fn.run(s);
  if (s.size() == 1 && s[0].isTuple()) {
    const auto& elems = s[0].toTupleRef().elements();
    return std::vector<c10::IValue>(elems.begin(), elems.end());
  }
  return std::vector<c10::IValue>(s.begin(), s.end());
}

bool sameLayouts(const std::vector<c10::IValue>& a, const std::vector<c10::IValue>& b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].isTensor() || !b[i].isTensor())
      continue;
    const at::Tensor &x = a[i].toTensor(), &y = b[i].toTensor();
    if (!x.defined() || !y.defined()) {
      if (x.defined() != y.defined())
        return false;
      continue;
    }
    if (x.sizes() != y.sizes() || x.is_mkldnn() || y.is_mkldnn() ||
        (x.is_contiguous() != y.is_contiguous()))
      return false;
  }
  return true;
}

} // namespace

void Profiler::measureEntryConversion(const at::Tensor& t, int rank) {
  // What a region's entry conversion costs (to channels-last), once per layout, for xcost.
  const auto target =
      rank == 5 ? formats::LayoutTarget::ChannelsLast3d : formats::LayoutTarget::ChannelsLast;
  if (t.dim() != rank || t.is_contiguous(memoryFormatOf(target)) || t.scalar_type() != at::kFloat)
    return;
  formats::ConversionCost probe;
  probe.layout = layoutOf(t);
  probe.target = target;
  for (const auto& c : p_.conversion_cost_table)
    if (c.key() == probe.key())
      return;
  p_.conversion_cost_table.push_back(
      measureConversionCost(t, "model", o_.warmup, o_.repeats, db_.get(), target));
}

void Profiler::measureRegions() {
  // Under --freeze, the model profiled is frozen already (its graph is inlined here in place;
  // the profile ran a copy); otherwise it is loaded and frozen for the regions alone.
  tspass::LoadedModel model = frozen_ ? *frozen_ : tspass::loadModel(o_.model);
  if (!frozen_) {
    if (!tspass::isFrozen(model.module) && model.module.is_training()) {
      p_.regions_note = "the model is in training mode: layout regions are measured on the "
                        "model frozen, which torch.jit.freeze allows in eval mode only";
      return;
    }
    tspass::freezeModel(model, o_.method);
    tspass::canonicalize(model, o_.method);
    tspass::specializeToInputRanks(model, o_.method, inputRanks());
  }
  auto graph = tspass::inlineMethod(model.module, o_.method);
  tspass::useOriginalSourceRanges(*graph);
  auto regions = tspass::findLayoutRegions(*graph, inputRanks());
  if (regions.empty()) {
    p_.regions_note = tspass::whyNoRegion(*graph);
    return;
  }
  const auto borders = tspass::regionBorders(regions);
  tspass::GraphIndex index(*graph);
  GraphRunner runner(index);
  GraphRunner::Trace trace;
  std::vector<c10::IValue> in = inputs_;
  in[0] = model.module._ivalue();
  runner.run(in, {/*keep_values=*/true, false, false}, &trace);

  progress_.phase("timing layout regions", regions.size());
  // Largest first: by the time the profile's run spent in their ops (a detector's head, five
  // convolutions run on every feature level, outweighs its 53-convolution backbone), then by
  // convolutions and ops. Under --budget, the regions that gain most are the ones timed. The
  // profile lists them in graph order, by id.
  std::map<std::string, double> op_ms; // by anchor (file, function, expr, op, ordinal)
  auto key = [](const formats::Anchor& a) {
    return a.file + '\n' + a.function + '\n' + a.expr + '\n' + a.op + '\n' +
           std::to_string(a.ordinal);
  };
  for (const formats::Op& op : p_.ops)
    op_ms[key(op.anchor)] += op.duration_ms;
  std::vector<formats::RegionRef> refs; // each region as the profile names it, by id
  std::vector<double> work(regions.size(), 0.0);
  for (std::size_t i = 0; i < regions.size(); ++i) {
    refs.push_back(tspass::regionRef(regions[i], index, static_cast<std::int64_t>(i)));
    for (const formats::Anchor& a : refs[i].nodes)
      if (auto it = op_ms.find(key(a)); it != op_ms.end())
        work[i] += it->second;
  }
  std::vector<std::size_t> largest_first(regions.size());
  std::iota(largest_first.begin(), largest_first.end(), 0);
  std::stable_sort(largest_first.begin(), largest_first.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = regions[a];
    const auto& y = regions[b];
    return std::make_tuple(work[a], x.convolutions, x.nodes.size()) >
           std::make_tuple(work[b], y.convolutions, y.nodes.size());
  });
  std::size_t timed = 0;
  double work_left = std::accumulate(work.begin(), work.end(), 0.0); // of the regions not timed
  std::map<std::string, std::size_t> timed_by_key; // regionTimingKey -> index into p_.regions
  for (std::size_t at : largest_first) {
    tspass::LayoutRegion& r = regions[at];
    // A defined tensor the region's block saw (a branch in a loop: on the trip that took it).
    const torch::jit::Block* block = r.nodes.front()->owningBlock();
    auto seen = [&](const torch::jit::Value* v) -> const at::Tensor* {
      if (!runner.hasValue(trace, v, block))
        return nullptr;
      const c10::IValue& iv = runner.valueOf(trace, v, block);
      return iv.isTensor() && iv.toTensor().defined() ? &iv.toTensor() : nullptr;
    };
    formats::Region out;
    out.ref = std::move(refs[at]);
    // Its share of what is left of the budget for rounds: by its work among those still to time.
    const double share = work_left > 0 ? work[at] / work_left : 1.0;
    work_left -= work[at];
    progress_.tick(++timed);
    // A region the same as one timed in full already (timingKey: a transformer's twelve
    // layers, a ResNet stage's repeated blocks) takes its times; its first runs and outputs,
    // which depend on its own weights, are still its own. It costs a few runs, so the budget
    // does not stop it: ViT-B/16's twelve MLP outputs were left unmeasured under the default
    // budget, to run on OpenBLAS beside the fast form's packed ops.
    std::string timing_key;
    {
      tspass::ExtractedRegion x0 = tspass::extractRegion(r);
      std::vector<c10::IValue> in0;
      bool all_seen = true;
      for (torch::jit::Value* v : x0.inputs) {
        if (!runner.hasValue(trace, v, block)) {
          all_seen = false;
          break;
        }
        in0.push_back(runner.valueOf(trace, v, block));
      }
      if (all_seen)
        timing_key = regionTimingKey(*x0.graph, in0);
    }
    const auto twin = timing_key.empty() ? timed_by_key.end() : timed_by_key.find(timing_key);
    const bool has_twin = twin != timed_by_key.end();
    if (!has_twin && pastBudget(1.0 - kReserveShare)) {
      out.candidates = tspass::regionCandidates(r.rank);
      out.note = kBudgetSpent;
      p_.regions.push_back(std::move(out));
      continue;
    }
    // The rank was inferred where the graph does not say it (a detector's batched image): the
    // values this run gives the region decide.
    std::string wrong_rank;
    for (const torch::jit::Value* v : tspass::regionEntries(r))
      if (const at::Tensor* entry = seen(v)) {
        const at::Tensor& t = *entry;
        out.entries.push_back(layoutOf(t));
        if (r.rank != 4 && r.rank != 5)
          continue;
        measureEntryConversion(t, r.rank); // of a tensor of the region's rank only
        if (t.dim() != r.rank && wrong_rank.empty())
          wrong_rank = "its input %" + v->debugName() + " is " + std::to_string(t.dim()) +
                       "-D on these inputs, where its convolutions take " + std::to_string(r.rank) +
                       "-D tensors";
      }
    bool exits_known = true;
    for (const torch::jit::Value* v : tspass::regionExits(r)) {
      if (const at::Tensor* exit = seen(v))
        out.exits.push_back(layoutOf(*exit));
      else
        exits_known = false;
    }
    if (exits_known)
      for (const auto& [exit, reader] : borders[at])
        out.feeds.push_back({static_cast<std::int64_t>(exit), static_cast<std::int64_t>(reader)});
    out.candidates = tspass::regionCandidates(r.rank);
    if (!wrong_rank.empty()) {
      out.note = wrong_rank;
      p_.regions.push_back(std::move(out));
      continue;
    }
    if (!r.convex) {
      out.note = "a path leaves the region and comes back into it: it cannot run on its own";
      p_.regions.push_back(std::move(out));
      continue;
    }
    if (!exits_known) {
      out.note = "a value it hands on was not computed on these inputs";
      p_.regions.push_back(std::move(out));
      continue;
    }

    // Each candidate as a graph of its own, on the values the model's run gave the region.
    std::vector<Runnable> runs(out.candidates.size());
    std::vector<double> first(out.candidates.size(), 0); // each one's first run, ms
    bool too_big = false;
    std::vector<c10::IValue> inputs;
    for (std::size_t i = 0; i < out.candidates.size(); ++i) {
      formats::RegionCandidate& c = out.candidates[i];
      tspass::ExtractedRegion x = tspass::extractRegion(r);
      if (i == 0) {
        for (torch::jit::Value* v : x.inputs)
          inputs.push_back(runner.valueOf(trace, v, block));
      }
      // A concatenation of a feature list the fast form keeps channels-last (DenseNet's) enters
      // the fast form's channels-last candidates channels-last, as it will in the model.
      runs[i].inputs = inputs;
      if (c.needsRuntime() && c.traits().fits(4))
        for (std::size_t k = 0; k < x.inputs.size(); ++k)
          if (tspass::concatenatesChannelsLastList(x.inputs[k]) && inputs[k].isTensor() &&
              inputs[k].toTensor().dim() == 4)
            runs[i].inputs[k] = inputs[k].toTensor().contiguous(at::MemoryFormat::ChannelsLast);
      tspass::RegionEdit e;
      try {
        e = tspass::applyRegionLayout(*x.graph, x.region, c);
      } catch (const std::exception& ex) { // a weight the runtime refuses to pack, say
        const std::string what = ex.what();
        e.message = "cannot be rewritten: " + what.substr(0, what.find('\n'));
      }
      if (i > 0 && !e.applied) {
        c.note = e.message;
        continue;
      }
      runs[i].fn = std::make_unique<torch::jit::GraphFunction>("region", x.graph, nullptr);
      try {
        const auto s = std::chrono::steady_clock::now();
        runs[i].outputs = runOnce(*runs[i].fn, runs[i].inputs);
        first[i] = msSince(s);
      } catch (const std::exception& ex) {
        const std::string what = ex.what();
        c.note = "fails when run on its own: " + what.substr(0, what.find('\n'));
        runs[i].fn.reset();
        if (i == 0)
          break; // nothing to compare with: the region is not measured
        continue;
      }
      if (i == 0) {
        // Under --budget, a region whose other candidates' first runs would not fit in what is
        // left (taken as slow as the region as it is) is not timed: the smaller ones after it
        // may be. The largest region, timed first, always is (three rounds at least): it is
        // the one that gains most, and the budget may run over by it.
        const double n = static_cast<double>(out.candidates.size() - 1);
        if (const auto left = regionsLeftMs();
            !has_twin && timed > 1 && left && first[0] * n > *left) {
          budget_spent_ = too_big = true;
          break;
        }
        continue;
      }
      if (!sameLayouts(runs[0].outputs, runs[i].outputs)) {
        c.note = "hands its values on in another layout";
        runs[i].fn.reset();
        continue;
      }
      c.identical_output = tspass::bitwiseEqual(runs[0].outputs, runs[i].outputs);
      if (!c.identical_output) {
        const double err = tspass::maxRelativeError(runs[0].outputs, runs[i].outputs);
        if (std::isfinite(err))
          c.output_error = err;
      }
    }
    // A slow region under --budget (its first round over kSlowRoundMs: a detector's 2-second
    // backbone) measures its rounding noise on its layers alone, not on two draws of its inputs
    // as well (one run, not three), and is timed in two rounds at least, not three: its
    // candidates differ by far more than a round's spread.
    double first_round_ms = 0;
    for (std::size_t i = 0; i < runs.size(); ++i)
      first_round_ms += runs[i].fn ? first[i] : 0.0;
    const bool slow = o_.budget_s > 0 && first_round_ms > kSlowRoundMs;
    const int least_rounds = slow ? 2 : 3;
    // Nor one whose least work after the first runs does not fit: the runs of its rounding
    // noise and its least rounds of the region as it is and the candidates not slower than it.
    if (const auto left = regionsLeftMs();
        !has_twin && timed > 1 && !too_big && left && runs[0].fn) {
      double round = first[0];
      for (std::size_t i = 1; i < runs.size(); ++i)
        if (runs[i].fn && first[i] <= kHopeless * first[0])
          round += first[i];
      if ((slow ? 1.0 : 3.0) * first[0] + least_rounds * round > *left)
        budget_spent_ = too_big = true;
    }
    if (too_big) {
      out.note = kBudgetSpent; // its least work does not fit in what is left
      p_.regions.push_back(std::move(out));
      continue;
    }
    if (!runs[0].fn) {
      out.note = out.candidates[0].note;
      p_.regions.push_back(std::move(out));
      continue;
    }
    // What float32 rounding alone does to the exits: the region as it is with each of its
    // layers' outputs moved by one unit in the last place (another summation order's rounding,
    // tspass/layer_noise.h), and with its float inputs moved so (the most of two draws; a slow
    // region's layers tell enough).
    bool layers_moved = false;
    if (out.candidates.size() > 1) {
      tspass::ExtractedRegion noisy = tspass::extractRegion(r);
      if (tspass::moveLayerOutputsOneUlp(*noisy.graph) > 0) {
        torch::jit::GraphFunction fn("region_noise", noisy.graph, nullptr);
        const double e = tspass::maxRelativeError(runs[0].outputs, runOnce(fn, runs[0].inputs));
        if (std::isfinite(e))
          out.rounding_error = std::max(out.rounding_error.value_or(0.0), e);
        layers_moved = true;
      }
    }
    const std::uint64_t draws = slow ? (layers_moved ? 0 : 1) : 2;
    for (std::uint64_t draw = 0; draw < draws && out.candidates.size() > 1; ++draw) {
      const double e = tspass::maxRelativeError(
          runs[0].outputs, runOnce(*runs[0].fn, tspass::oneUlpAway(runs[0].inputs, draw)));
      if (std::isfinite(e))
        out.rounding_error = std::max(out.rounding_error.value_or(0.0), e);
    }
    if (has_twin) {
      std::vector<bool> ran;
      for (const Runnable& run : runs)
        ran.push_back(run.fn != nullptr);
      takeTwinTimes(out, p_.regions[twin->second], ran);
      p_.regions.push_back(std::move(out));
      continue;
    }
    // Rounds of one run each, the order rotated and reversed every round.
    std::vector<std::size_t> live;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].fn)
        live.push_back(i);
    // Warm-up rounds, each candidate's last one kept: a slow region (a detector's backbone at
    // 1.5 s a run) warms up once, and under --budget a candidate far slower than the region as
    // it is is timed no further.
    // Under --budget, a region whose first round (the runs whose outputs were compared) took
    // longer than kSlowRoundMs has warmed up already: those runs count as its warm-up.
    std::vector<double> warm = first;
    if (!slow) {
      const auto t0 = std::chrono::steady_clock::now();
      int warmups = 0;
      for (int w = 0; w < std::max(o_.warmup, 2); ++w) {
        for (std::size_t i : live) {
          const auto s = std::chrono::steady_clock::now();
          (void)runOnce(*runs[i].fn, runs[i].inputs);
          warm[i] = msSince(s);
        }
        ++warmups;
        if (o_.budget_s > 0 && msSince(t0) > kSlowRoundMs)
          break;
      }
      first_round_ms = msSince(t0) / warmups;
    }
    if (o_.budget_s > 0 && first_round_ms > kSlowRoundMs) {
      std::vector<std::size_t> kept{live.front()};
      for (std::size_t k = 1; k < live.size(); ++k) {
        const std::size_t i = live[k];
        if (warm[i] > kHopeless * warm[live.front()] && slow) {
          // Its first run packed its weights and made its kernels: judged on a second one
          // (VGG's first linear: 27x slower on the run that packs its 411 MB weight).
          const auto s = std::chrono::steady_clock::now();
          (void)runOnce(*runs[i].fn, runs[i].inputs);
          warm[i] = msSince(s);
        }
        if (warm[i] > kHopeless * warm[live.front()]) {
          out.candidates[i].note =
              "not timed further (--budget): " +
              std::to_string(std::lround(100 * (warm[i] / warm[live.front()] - 1))) +
              "% slower than the region as it is on its warm-up run";
          runs[i].fn.reset();
        } else {
          kept.push_back(i);
        }
      }
      // Nor one far slower than the fastest of them (channels_last beside packed on a
      // detector's 2-second backbone): rounds of it would decide nothing.
      double fastest = warm[live.front()];
      for (std::size_t k = 1; k < kept.size(); ++k)
        fastest = std::min(fastest, warm[kept[k]]);
      live = {kept.front()};
      for (std::size_t k = 1; k < kept.size(); ++k) {
        const std::size_t i = kept[k];
        if (warm[i] > kOutpaced * fastest) {
          out.candidates[i].note = "not timed further (--budget): " +
                                   std::to_string(std::lround(100 * (warm[i] / fastest - 1))) +
                                   "% slower than the fastest candidate on its warm-up run";
          runs[i].fn.reset();
        } else {
          live.push_back(i);
        }
      }
    }
    double round_ms = 0;
    for (std::size_t i : live)
      round_ms += warm[i];
    // Small regions are timed more often (up to three times --repeats): their gains are a few
    // percent of a few milliseconds, and paired rounds are cheap there. Under --budget, no more
    // rounds than its share of the budget left holds (at least its least): the regions after it, a
    // detector's heads after its backbone, get theirs.
    Counts counts = budgetedCounts(round_ms, 0, 3 * o_.repeats, kPairBudgetMs * 4, 5);
    if (const auto left = regionsLeftMs())
      counts.repeats = std::max(
          least_rounds,
          std::min(counts.repeats, static_cast<int>(share * *left / std::max(round_ms, 1e-3))));
    for (int round = 0; round < counts.repeats; ++round) {
      // Under --budget, a round that would end past it is not started once one is done: the
      // user waits for the budget, not for the rounds (the first region included, whose least
      // rounds are otherwise kept).
      if (const auto left = regionsLeftMs(); round > 0 && left && *left < round_ms) {
        budget_spent_ = true;
        break;
      }
      std::vector<std::size_t> order = live;
      std::rotate(order.begin(), order.begin() + (round % static_cast<int>(order.size())),
                  order.end());
      if (round % 2)
        std::reverse(order.begin(), order.end());
      std::vector<double> t(runs.size(), 0);
      for (std::size_t i : order) {
        const auto s = std::chrono::steady_clock::now();
        (void)runOnce(*runs[i].fn, runs[i].inputs);
        t[i] = msSince(s);
      }
      for (std::size_t i : live) {
        runs[i].samples.push_back(t[i]);
        runs[i].deltas.push_back(t[i] - t[0]);
      }
    }
    for (std::size_t i : live) {
      formats::RegionCandidate& c = out.candidates[i];
      const TimingStats s = summarize(runs[i].samples);
      c.measured = true;
      c.time_ms = s.median_ms;
      c.spread_ms = s.iqr_ms;
      if (i > 0) {
        const TimingStats d = summarize(runs[i].deltas);
        c.delta_ms = d.median_ms;
        c.delta_spread_ms = d.iqr_ms;
        c.rounds = static_cast<std::int64_t>(runs[i].deltas.size());
        c.faster_rounds = std::count_if(runs[i].deltas.begin(), runs[i].deltas.end(),
                                        [](double x) { return x < 0; });
      }
    }
    if (!timing_key.empty() && out.candidates.front().measured)
      timed_by_key.emplace(timing_key, p_.regions.size());
    p_.regions.push_back(std::move(out));
  }
  std::sort(p_.regions.begin(), p_.regions.end(),
            [](const formats::Region& a, const formats::Region& b) { return a.ref.id < b.ref.id; });
}

} // namespace xalloc::profiler::detail
