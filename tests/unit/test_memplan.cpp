// memplan: the best-fit allocator's invariants, the static planner on thousands of random
// instances (every plan verified, lower bound <= workspace <= no-reuse total, portfolio never
// worse than any heuristic), the verifier catching broken plans, and budgets.
#include <random>

#include <gtest/gtest.h>

#include "xalloc/best_fit.h"
#include "xalloc/error.h"
#include "xalloc/memplan/instances.h"
#include "xalloc/memplan/liveness.h"
#include "xalloc/memplan/planner.h"

using namespace xalloc;
using namespace xalloc::memplan;

TEST(Memplan, PeakLiveBytes) {
  EXPECT_EQ(peakLiveBytes({}), 0);
  EXPECT_EQ(peakLiveBytes({{0, 0, 5}}), 5);
  // [0,1] and [2,3] never overlap; [1,2] overlaps both.
  EXPECT_EQ(peakLiveBytes({{0, 1, 10}, {2, 3, 20}}), 20);
  EXPECT_EQ(peakLiveBytes({{0, 1, 10}, {2, 3, 20}, {1, 2, 5}}), 25);
  EXPECT_EQ(peakLiveBytes({{0, 9, 1}, {0, 9, 2}, {5, 5, 4}}), 7);
  EXPECT_THROW(peakLiveBytes({{3, 2, 1}}), xalloc::LogicError);
}

TEST(BestFit, BestFitCoalescingAndTailGrowth) {
  BestFitAllocator a(16);
  auto x = a.alloc(100); // 112
  auto y = a.alloc(16);
  auto z = a.alloc(200); // 208
  EXPECT_EQ(x, 0);
  EXPECT_EQ(y, 112);
  EXPECT_EQ(z, 128);
  EXPECT_EQ(a.workspace(), 336);
  a.free(x, 100);
  a.free(z, 200); // the tail is free now
  EXPECT_EQ(a.checkInvariants(), "");
  // 48 bytes fit the 112-byte hole (best fit) rather than the 208-byte tail.
  EXPECT_EQ(a.alloc(48), 0);
  // 300 bytes fit nowhere: the free tail at 128 is extended instead of leaving a hole.
  EXPECT_EQ(a.alloc(300), 128);
  EXPECT_EQ(a.workspace(), 128 + 304);
  a.free(y, 16);
  EXPECT_EQ(a.checkInvariants(), "");
  EXPECT_EQ(a.used(), 48 + 304);
  EXPECT_EQ(a.peak(), 48 + 16 + 304);
  // Freeing merges with both neighbours: one free block remains after the last free.
  a.free(0, 48);
  a.free(128, 300);
  EXPECT_EQ(a.freeBlocks(), 1u);
  EXPECT_EQ(a.used(), 0);
  EXPECT_EQ(a.checkInvariants(), "");
  EXPECT_THROW(a.free(0, 48), xalloc::LogicError); // double free
}

TEST(BestFit, AlignmentAndReserve) {
  BestFitAllocator a(8);
  EXPECT_EQ(a.alloc(8), 0);
  EXPECT_EQ(a.alloc(8, 64), 64); // padding 8..64 becomes a free block
  EXPECT_EQ(a.alloc(40), 8);     // and is used
  EXPECT_EQ(a.checkInvariants(), "");
  EXPECT_TRUE(a.reserve(256, 64)); // beyond the end
  EXPECT_FALSE(a.reserve(64, 8));  // taken
  EXPECT_TRUE(a.reserve(128, 64)); // inside the gap before 256
  EXPECT_EQ(a.workspace(), 320);
  EXPECT_EQ(a.checkInvariants(), "");
}

TEST(BestFit, RandomOperationsKeepTheInvariants) {
  std::mt19937 rng(3);
  for (int round = 0; round < 50; ++round) {
    BestFitAllocator a(std::int64_t{1} << (rng() % 7));
    std::vector<std::pair<std::int64_t, std::int64_t>> live;
    for (int op = 0; op < 400; ++op) {
      if (live.empty() || rng() % 3) {
        std::int64_t size = static_cast<std::int64_t>(rng() % 5000);
        live.emplace_back(a.alloc(size), size);
      } else {
        std::size_t k = rng() % live.size();
        a.free(live[k].first, live[k].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      ASSERT_EQ(a.checkInvariants(), "") << "round " << round << " op " << op;
    }
  }
}

namespace {

// A DAG-shaped instance: op i produces a tensor read by a few later ops (mostly soon after,
// sometimes much later, like a residual), sizes log-uniform from 64 B to 4 MiB.
std::vector<TensorSpec> randomDag(std::mt19937& rng, int ops, bool with_pins) {
  std::vector<TensorSpec> ts;
  std::uniform_real_distribution<double> log_size(6.0, 22.0);
  for (int i = 0; i < ops; ++i) {
    TensorSpec t;
    t.id = "t" + std::to_string(i);
    t.size = static_cast<std::int64_t>(std::exp2(log_size(rng)));
    t.first_op = i;
    int reach =
        (rng() % 8 == 0) ? 1 + static_cast<int>(rng() % 40) : 1 + static_cast<int>(rng() % 4);
    t.last_op = std::min(ops - 1, i + reach);
    if (rng() % 10 == 0)
      t.alignment = 256;
    ts.push_back(t);
  }
  if (with_pins && !ts.empty()) {
    ts[0].fixed_offset = 0;                         // e.g. the input buffer, owned by the caller
    ts.back().fixed_offset = std::int64_t{1} << 23; // above anything t0 (at most 4 MiB) covers
  }
  return ts;
}

std::int64_t noReuseTotal(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  std::int64_t total = 0;
  for (const auto& t : ts)
    total += alignUp(t.size, t.alignment > 0 ? t.alignment : o.alignment);
  return total;
}

} // namespace

TEST(Planner, ThousandsOfRandomInstances) {
  std::mt19937 rng(11);
  PlanOptions o;
  for (int round = 0; round < 2000; ++round) {
    const int n = 1 + static_cast<int>(rng() % 60);
    auto ts = randomDag(rng, n, false);
    ASSERT_EQ(validateTensors(ts), "");
    const std::int64_t lb = lowerBound(ts, o);
    Plan best = planMemory(ts, o);
    ASSERT_EQ(verifyPlan(ts, best, o), "") << "round " << round;
    EXPECT_EQ(best.lower_bound_bytes, lb);
    EXPECT_LE(lb, best.workspace_bytes);
    EXPECT_LE(best.workspace_bytes, noReuseTotal(ts, o));
    for (const Plan& p : {planGreedyBySize(ts, o), planGreedyByBreadth(ts, o)}) {
      ASSERT_EQ(verifyPlan(ts, p, o), "") << p.heuristic << " round " << round;
      EXPECT_LE(best.workspace_bytes, p.workspace_bytes) << p.heuristic;
    }
    auto replay = planReplay(ts, o);
    ASSERT_TRUE(replay.has_value());
    ASSERT_EQ(verifyPlan(ts, *replay, o), "") << "replay round " << round;
    EXPECT_LE(best.workspace_bytes, replay->workspace_bytes);
    EXPECT_GE(best.tried.size(), 5u); // size, breadth, area, replay, no-reuse (+ search)
    for (const auto& [name, ws] : best.tried) {
      if (ws > 0) {
        EXPECT_LE(best.workspace_bytes, ws) << name;
      }
    }
  }
}

TEST(Planner, PinnedTensorsKeepTheirOffsets) {
  std::mt19937 rng(5);
  PlanOptions o;
  for (int round = 0; round < 300; ++round) {
    auto ts = randomDag(rng, 2 + static_cast<int>(rng() % 40), true);
    Plan p = planMemory(ts, o);
    ASSERT_EQ(verifyPlan(ts, p, o), "") << round;
    EXPECT_EQ(p.offsets.front(), 0);
    EXPECT_EQ(p.offsets.back(), std::int64_t{1} << 23);
  }
}

TEST(Planner, ReachesTheLowerBoundOnSimpleChains) {
  // A chain where each op reads the previous tensor: two buffers ping-pong.
  std::vector<TensorSpec> ts;
  for (int i = 0; i < 10; ++i)
    ts.push_back({"c" + std::to_string(i), 1024, i, i + 1, 0, std::nullopt});
  Plan p = planMemory(ts);
  EXPECT_EQ(p.workspace_bytes, 2048);
  EXPECT_EQ(p.lower_bound_bytes, 2048);
  EXPECT_DOUBLE_EQ(p.ratio(), 1.0);
}

TEST(Planner, VerifierCatchesBrokenPlans) {
  std::vector<TensorSpec> ts = {{"a", 100, 0, 2, 0, std::nullopt},
                                {"b", 100, 1, 3, 0, std::nullopt},
                                {"c", 100, 3, 4, 0, std::nullopt}};
  PlanOptions o;
  Plan p = planMemory(ts, o);
  ASSERT_EQ(verifyPlan(ts, p, o), "");
  Plan bad = p;
  bad.offsets[1] = bad.offsets[0]; // a and b are both alive at op 1 and 2
  EXPECT_NE(verifyPlan(ts, bad, o).find("overlap"), std::string::npos);
  bad = p;
  bad.offsets[2] += 1;
  EXPECT_NE(verifyPlan(ts, bad, o).find("misaligned"), std::string::npos);
  bad = p;
  bad.workspace_bytes = 64;
  EXPECT_NE(verifyPlan(ts, bad, o).find("past the workspace"), std::string::npos);
}

TEST(Planner, BadInputAndBudgets) {
  EXPECT_NE(validateTensors({{"a", -1, 0, 1, 0, std::nullopt}}), "");
  EXPECT_NE(validateTensors({{"a", 1, 3, 1, 0, std::nullopt}}).find("before first_op"),
            std::string::npos);
  EXPECT_NE(validateTensors({{"a", 1, 0, 1, 0, std::nullopt}, {"a", 2, 0, 1, 0, std::nullopt}})
                .find("duplicate"),
            std::string::npos);
  EXPECT_NE(validateTensors({{"p", 100, 0, 2, 0, 0}, {"q", 100, 2, 3, 0, 50}}).find("pinned"),
            std::string::npos);
  EXPECT_EQ(validateTensors({{"p", 100, 0, 1, 0, 0}, {"q", 100, 2, 3, 0, 50}}), "");
  std::vector<TensorSpec> ts = {{"a", 1000, 0, 1, 0, std::nullopt},
                                {"b", 1000, 1, 2, 0, std::nullopt}};
  Plan p = planMemory(ts);
  EXPECT_EQ(estimateMemory(p), p.workspace_bytes);
  EXPECT_NO_THROW(requireWithinBudget(p, p.workspace_bytes));
  try {
    requireWithinBudget(p, 1500);
    FAIL();
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.budget(), 1500);
    EXPECT_NE(std::string(e.what()).find(std::to_string(p.workspace_bytes)), std::string::npos);
  }
}

// The quality goals (workspace / lower bound: geometric mean <= 1.03, worst <= 1.10) on seeded
// instances. The search is deterministic, so this cannot flake.
TEST(Planner, MeetsTheQualityGoalsOnSeededInstances) {
  for (auto make : {networkDagInstance, randomDagInstance}) {
    double log_sum = 0, worst = 0, greedy_log_sum = 0;
    const int count = 100;
    for (int i = 0; i < count; ++i) {
      auto ts = make(1000 + static_cast<std::uint64_t>(i), 20 + (i * 37) % 400);
      Plan p = planMemory(ts);
      ASSERT_EQ(verifyPlan(ts, p), "");
      log_sum += std::log(p.ratio());
      worst = std::max(worst, p.ratio());
      greedy_log_sum += std::log(planGreedyBySize(ts).ratio());
    }
    EXPECT_LE(std::exp(log_sum / count), 1.03);
    EXPECT_LE(worst, 1.10);
    EXPECT_LT(log_sum, greedy_log_sum); // the portfolio and search beat greedy-by-size alone
  }
}
