// Micro-benchmarks (Google Benchmark) of the parts that must stay cheap as models grow: the cost
// fit and its predictions, reading and writing documents, scheduling, and diffs.
#include <random>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/formats/documents.h"
#include "xalloc/rewriter/text_diff.h"
#include "xalloc/scheduler/decide.h"

using namespace xalloc;

namespace {

formats::Layout transposed(std::int64_t a, std::int64_t b) {
  return {{a, b}, {1, a}, 0, "float32", "cpu"};
}

std::vector<costfit::Sample> samples(std::size_t n) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::int64_t> dim(8, 2048);
  std::vector<costfit::Sample> s;
  for (std::size_t i = 0; i < n; ++i) {
    auto l = transposed(dim(rng), dim(rng));
    s.push_back({l, 1e-6 * static_cast<double>(l.numel()) + 0.002});
  }
  return s;
}

// A profile with `sites` transposed values, each read by two consumers.
formats::Profile syntheticProfile(int sites) {
  formats::Profile p;
  p.settings.repeats = 15;
  for (int i = 0; i < 3 * sites; ++i) {
    formats::Op op;
    op.id = i;
    op.kind = i % 3 == 0 ? "aten::transpose" : "aten::mm";
    op.anchor = {"m.py", "forward", "e" + std::to_string(i), op.kind, 0, i + 1, 1};
    op.duration_ms = 0.1;
    p.ops.push_back(op);
  }
  for (int s = 0; s < sites; ++s) {
    formats::Record r;
    r.id = s;
    r.producer_op = 3 * s;
    r.layout = transposed(64 + s % 7, 64);
    r.contiguous = false;
    r.bytes = r.storage_bytes = r.layout.bytes();
    r.storage_id = s;
    r.first_use = 3 * s;
    r.last_use = 3 * s + 2;
    for (int c = 1; c <= 2; ++c) {
      formats::ConsumerTiming t;
      t.op_id = 3 * s + c;
      t.measured = true;
      t.time_as_is_ms = 0.1;
      t.time_contiguous_ms = s % 2 ? 0.05 : 0.099;
      r.consumers.push_back(t);
    }
    p.records.push_back(r);
    formats::ConversionCost cc;
    cc.layout = r.layout;
    cc.median_ms = 0.01;
    cc.samples_ms = {0.01};
    p.conversion_cost_table.push_back(cc);
  }
  return p;
}

void BM_ClassicFit(benchmark::State& state) {
  auto s = samples(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(costfit::fitClassic(s, "cpu", "4-byte", 10));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ClassicFit)->Arg(100)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_ClassicPredict(benchmark::State& state) {
  auto e = costfit::fitClassic(samples(1000), "cpu", "4-byte", 10);
  auto l = transposed(300, 500);
  for (auto _ : state)
    benchmark::DoNotOptimize(costfit::predictClassic(e, l));
}
BENCHMARK(BM_ClassicPredict);

void BM_ProfileRoundTrip(benchmark::State& state) {
  auto text = formats::dumpDocument(
      formats::toJson(syntheticProfile(static_cast<int>(state.range(0)))), true);
  for (auto _ : state) {
    auto p = formats::profileFromJson(formats::parseJson(text, "p.json"), "p.json");
    benchmark::DoNotOptimize(formats::dumpDocument(formats::toJson(p), true));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ProfileRoundTrip)->Arg(100)->Arg(2000)->Unit(benchmark::kMillisecond);

void BM_MakeSchedule(benchmark::State& state) {
  auto p = syntheticProfile(static_cast<int>(state.range(0)));
  formats::Cost cost;
  cost.conversion_cost_table = p.conversion_cost_table;
  for (auto _ : state)
    benchmark::DoNotOptimize(scheduler::makeSchedule(p, cost));
}
BENCHMARK(BM_MakeSchedule)->Arg(200)->Arg(2000)->Unit(benchmark::kMillisecond);

void BM_UnifiedDiff(benchmark::State& state) {
  std::string a, b;
  for (int i = 0; i < 2000; ++i) {
    a += "  %" + std::to_string(i) + " : Tensor = aten::op(%x)\n";
    b += (i % 200 == 7 ? "  inserted\n" : "") + std::string("  %") + std::to_string(i) +
         " : Tensor = aten::op(%x)\n";
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(rewriter::unifiedDiff(a, b, "a", "b"));
}
BENCHMARK(BM_UnifiedDiff)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
