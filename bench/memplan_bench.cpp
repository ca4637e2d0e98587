// xbench-memplan: how close the static planner gets to the lower bound (workspace / lower bound,
// geometric mean and worst) on real tensor lifetimes from profiles and on seeded random
// instances, how long it takes on 10k and 100k tensors, and how many alloc+free pairs per
// second the best-fit allocator sustains.
//
// Usage: xbench-memplan [profile.json ...]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "xalloc/best_fit.h"
#include "xalloc/formats/documents.h"
#include "xalloc/memplan/instances.h"
#include "xalloc/memplan/plan_io.h"
#include "xalloc/memplan/planner.h"
#include "xalloc/tool.h"

using namespace xalloc;
using namespace xalloc::memplan;

namespace {

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Ratios {
  double log_sum = 0, worst = 0;
  int n = 0;
  void add(double r) {
    log_sum += std::log(r);
    worst = std::max(worst, r);
    ++n;
  }
  double geomean() const { return n ? std::exp(log_sum / n) : 0.0; }
};

void family(const char* name, std::vector<TensorSpec> (*make)(std::uint64_t, int), int count) {
  Ratios all, greedy;
  double ms = 0;
  for (int i = 0; i < count; ++i) {
    auto ts = make(1000 + static_cast<std::uint64_t>(i), 20 + (i * 37) % 400);
    auto t0 = std::chrono::steady_clock::now();
    Plan p = planMemory(ts);
    ms += msSince(t0);
    all.add(p.ratio());
    greedy.add(planGreedyBySize(ts).ratio());
  }
  std::printf("%-22s %6d %9.4f %9.4f %14.4f %9.4f %10.2f\n", name, count, all.geomean(), all.worst,
              greedy.geomean(), greedy.worst, ms / count);
}

int run(const std::vector<std::string>& profiles) {
  std::printf(
      "workspace / lower bound (planMemory: portfolio + search; greedy: greedy-by-size alone)\n");
  std::printf("%-22s %6s %9s %9s %14s %9s %10s\n", "instances", "count", "geomean", "worst",
              "greedy geomean", "worst", "ms/plan");
  for (const auto& path : profiles) {
    auto ts = tensorsFromProfile(formats::loadProfile(path));
    auto t0 = std::chrono::steady_clock::now();
    Plan p = planMemory(ts);
    double ms = msSince(t0);
    Plan g = planGreedyBySize(ts);
    std::string name = path.substr(path.rfind('/') + 1);
    std::printf("%-22s %6zu %9.4f %9.4f %14.4f %9.4f %10.2f   (%s, %lld / %lld bytes)\n",
                name.c_str(), ts.size(), p.ratio(), p.ratio(), g.ratio(), g.ratio(), ms,
                p.heuristic.c_str(), static_cast<long long>(p.workspace_bytes),
                static_cast<long long>(p.lower_bound_bytes));
  }
  family("network-shaped DAGs", networkDagInstance, 200);
  family("random DAGs", randomDagInstance, 200);

  std::printf("\ntime to plan (planMemory, all heuristics)\n");
  for (int n : {10000, 100000}) {
    auto ts = networkDagInstance(7, n);
    auto t0 = std::chrono::steady_clock::now();
    Plan p = planMemory(ts);
    double ms = msSince(t0);
    auto tr = randomDagInstance(7, n);
    auto t1 = std::chrono::steady_clock::now();
    Plan q = planMemory(tr);
    double ms2 = msSince(t1);
    std::printf(
        "  %6d tensors: network-shaped %7.1f ms (ratio %.4f), random %7.1f ms (ratio %.4f)\n",
        static_cast<int>(ts.size()), ms, p.ratio(), ms2, q.ratio());
  }

  std::printf(
      "\nbest-fit allocator, 1M operations (random sizes 64 B..1 MiB, ~1000 live blocks)\n");
  BestFitAllocator alloc(64);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> log_size(6.0, 20.0);
  std::vector<std::pair<std::int64_t, std::int64_t>> live;
  live.reserve(2048);
  for (int i = 0; i < 1000; ++i) {
    auto size = static_cast<std::int64_t>(std::exp2(log_size(rng)));
    live.emplace_back(alloc.alloc(size), size);
  }
  std::vector<std::int64_t> sizes(500000);
  std::vector<std::size_t> picks(500000);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sizes[i] = static_cast<std::int64_t>(std::exp2(log_size(rng)));
    picks[i] = rng() % live.size();
  }
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < sizes.size(); ++i) { // one free + one alloc = 2 operations
    auto& slot = live[picks[i]];
    alloc.free(slot.first, slot.second);
    slot = {alloc.alloc(sizes[i]), sizes[i]};
  }
  double ms = msSince(t0);
  std::printf(
      "  %.2f M alloc+free pairs per second (%.0f ns per pair), %zu free blocks at the end, "
      "workspace %.1f MiB for %.1f MiB live\n",
      static_cast<double>(sizes.size()) / ms / 1e3, ms * 1e6 / static_cast<double>(sizes.size()),
      alloc.freeBlocks(), static_cast<double>(alloc.workspace()) / (1 << 20),
      static_cast<double>(alloc.used()) / (1 << 20));
  return kExitOk;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> profiles(argv + 1, argv + argc);
  return runGuarded("xbench-memplan", [&] { return run(profiles); });
}
