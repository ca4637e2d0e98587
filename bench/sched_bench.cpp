// xsched's solver at the sizes the scheduler issue names: 200 sites x 100 windows proven
// optimal (goal: 50 ms), and 10k ops / 2k sites within 1 s at a gap of at most 1%; with and
// without a memory budget. Seeded instances from randomProblem; times are wall clock, median
// and worst over the seeds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "xalloc/scheduler/instances.h"
#include "xalloc/scheduler/problem.h"

using namespace xalloc::scheduler;

namespace {

void run(const char* label, InstanceShape shape, int seeds, SolveLimits limits) {
  std::vector<double> ms;
  int optimal = 0;
  double worst_gap = 0;
  std::int64_t nodes = 0;
  int async = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    const Problem p = randomProblem(static_cast<std::uint64_t>(seed) + 777, shape);
    const auto t0 = std::chrono::steady_clock::now();
    const Solution s = solve(p, limits);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    optimal += s.optimal;
    worst_gap = std::max(worst_gap, s.gap());
    nodes = std::max(nodes, s.nodes);
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      async += p.sites[i].options[static_cast<std::size_t>(s.choice[i])].window >= 0;
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-44s median %8.2f ms  worst %8.2f ms  optimal %d/%d  worst gap %.4f%%  "
              "max nodes %lld  async/plan %.1f\n",
              label, ms[ms.size() / 2], ms.back(), optimal, seeds, 100 * worst_gap,
              static_cast<long long>(nodes), static_cast<double>(async) / seeds);
}

} // namespace

int main() {
  SolveLimits exact; // generous: these must finish and prove optimality
  exact.node_limit = 50'000'000;
  exact.time_limit_ms = 10'000;
  InstanceShape small;
  small.sites = 200;
  small.windows = 100;
  small.positions = 1000;
  small.capacity_scale = 0.5;
  run("200 sites x 100 windows", small, 20, exact);
  small.memory_budget = true;
  run("200 sites x 100 windows, memory budget", small, 20, exact);
  InstanceShape dense = small; // the same sites and windows crowded onto 300 ops
  dense.positions = 300;
  dense.capacity_scale = 0.25;
  dense.memory_budget = false;
  run("  dense (300 ops), tight windows", dense, 20, exact);
  dense.memory_budget = true;
  run("  dense (300 ops), tight windows, budget", dense, 20, SolveLimits{}); // 1 s default

  SolveLimits big; // the shipped defaults
  InstanceShape large;
  large.sites = 2000;
  large.windows = 1000;
  large.positions = 10000;
  large.capacity_scale = 0.5;
  run("10k ops, 2k sites, 1k windows", large, 5, big);
  large.memory_budget = true;
  run("10k ops, 2k sites, 1k windows, memory budget", large, 5, big);
  return 0;
}
