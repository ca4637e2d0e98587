// The exact scheduler: branch and bound against brute force on thousands of small instances,
// against an ILP solver (glpsol, cbc) on larger ones, its limits, and plans replayed with
// mispredicted costs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "xalloc/error.h"
#include "xalloc/scheduler/instances.h"
#include "xalloc/scheduler/problem.h"

using namespace xalloc::scheduler;

namespace {

bool near(double a, double b) {
  return std::abs(a - b) <= 1e-7 * std::max(1.0, std::abs(b));
}

InstanceShape smallShape(std::uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 1);
  InstanceShape s;
  s.sites = 1 + static_cast<int>(rng() % 7);
  s.windows = static_cast<int>(rng() % 4);
  s.positions = 12 + static_cast<int>(rng() % 20);
  s.memory_budget = rng() % 2 == 0;
  s.capacity_scale = 0.3 + 0.2 * static_cast<double>(rng() % 5);
  return s;
}

} // namespace

TEST(Solver, MatchesBruteForceOnSmallInstances) {
  int with_async = 0, with_budget = 0, budget_binding = 0;
  for (std::uint64_t seed = 0; seed < 1500; ++seed) {
    const InstanceShape shape = smallShape(seed);
    const Problem p = randomProblem(seed, shape);
    std::size_t combos = 1;
    for (const auto& s : p.sites)
      combos *= s.options.size();
    if (combos > 200000)
      continue;
    const Solution exact = bruteForce(p);
    const Solution bb = solve(p);
    ASSERT_TRUE(bb.optimal) << "seed " << seed;
    ASSERT_TRUE(near(bb.gain, exact.gain))
        << "seed " << seed << ": branch and bound " << bb.gain << ", brute force " << exact.gain;
    const auto checked = evaluate(p, bb.choice);
    ASSERT_TRUE(checked.has_value()) << "seed " << seed << ": infeasible plan";
    ASSERT_TRUE(near(*checked, bb.gain)) << "seed " << seed;
    ASSERT_EQ(bb.gap(), 0.0);
    const Solution g = greedy(p);
    if (std::isfinite(g.gain)) {
      ASSERT_LE(g.gain, exact.gain + 1e-9) << "seed " << seed;
    }
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      with_async += p.sites[i].options[static_cast<std::size_t>(bb.choice[i])].window >= 0;
    if (p.memory_budget) {
      ++with_budget;
      // Binding: the best plan without the budget breaks it.
      Problem free = p;
      free.memory_budget.reset();
      budget_binding += bruteForce(free).gain > exact.gain + 1e-9;
    }
  }
  // The instances exercise what they are meant to.
  EXPECT_GT(with_async, 300);
  EXPECT_GT(with_budget, 500);
  EXPECT_GT(budget_binding, 100);
}

TEST(Solver, NodeLimitReportsAValidBound) {
  int truncated = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    InstanceShape shape;
    shape.sites = 9;
    shape.windows = 3;
    shape.positions = 30;
    shape.memory_budget = true;
    shape.capacity_scale = 0.4;
    const Problem p = randomProblem(seed + 10000, shape);
    const Solution exact = bruteForce(p);
    SolveLimits tiny;
    tiny.node_limit = 5;
    const Solution s = solve(p, tiny);
    ASSERT_TRUE(evaluate(p, s.choice).has_value());
    ASSERT_LE(s.gain, exact.gain + 1e-9);
    ASSERT_GE(s.bound, exact.gain - 1e-9) << "seed " << seed << ": the bound cuts off the optimum";
    if (!s.optimal) {
      ++truncated;
      EXPECT_GE(s.gap(), 0.0);
    } else {
      EXPECT_TRUE(near(s.gain, exact.gain));
    }
  }
  EXPECT_GT(truncated, 10);
}

TEST(Solver, RejectsMalformedProblems) {
  Problem p;
  p.sites.push_back({{{1, -1, 1.0, 0, {}}}}); // option 0 must be "leave it"
  EXPECT_THROW(solve(p), xalloc::LogicError);
  Problem q;
  q.sites.push_back({{{}, {2, 3, 1.0, 0.5, {}}}}); // window 3 does not exist
  EXPECT_THROW(solve(q), xalloc::LogicError);
  Problem r;
  r.sites.push_back({{{}, {1, -1, std::nan(""), 0, {}}}});
  EXPECT_THROW(solve(r), xalloc::LogicError);
}

TEST(Solver, ImpossibleBudgetIsReported) {
  Problem p;
  p.base_live = {100, 200, 100};
  p.memory_budget = 150;
  p.sites.push_back({{{}, {1, -1, 1.0, 0, {{0, 2, 10}}}}});
  EXPECT_THROW(solve(p), xalloc::InputError);
  // A removal that frees enough makes it feasible, and leaves room for the conversion too
  // (peak 150 at op 1: 200 - 60 + 10).
  p.sites.push_back({{{}, {3, -1, -0.5, 0, {{1, 1, -60}}}}});
  const Solution s = solve(p);
  EXPECT_TRUE(s.optimal);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 1}));
  EXPECT_TRUE(near(s.gain, 0.5));
  EXPECT_EQ(planPeak(p, s.choice), 150);
}

TEST(Solver, PlansSurviveMispredictedCosts) {
  const double safety = 0.9;
  std::mt19937_64 rng(42);
  int async_plans = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    InstanceShape shape;
    shape.sites = 40;
    shape.windows = 25;
    shape.positions = 300;
    shape.memory_budget = seed % 2 == 0;
    Problem p = randomProblem(seed + 20000, shape);
    for (auto& c : p.window_capacity)
      c *= safety;
    const Solution s = solve(p);
    ASSERT_TRUE(evaluate(p, s.choice).has_value());
    std::vector<double> scale(p.sites.size());
    for (auto& x : scale) // every conversion up to 20% off its prediction, either way
      x = std::uniform_real_distribution<double>(0.8, 1.2)(rng);
    const Replay r = replay(p, s.choice, scale, safety);
    EXPECT_LE(r.worst_overrun, 1.0 - safety + 1e-9) << "seed " << seed;
    EXPECT_EQ(r.peak_bytes, planPeak(p, s.choice)) << "seed " << seed;
    if (p.memory_budget) {
      EXPECT_LE(r.peak_bytes, *p.memory_budget) << "seed " << seed;
    }
    for (std::size_t i = 0; i < p.sites.size(); ++i)
      async_plans += p.sites[i].options[static_cast<std::size_t>(s.choice[i])].window >= 0;
  }
  EXPECT_GT(async_plans, 300);
}

namespace {

// Runs an ILP solver on the problem in LP format; returns its optimal objective.
std::optional<double> ilpOptimum(const Problem& p, const std::string& solver) {
  char dir[] = "/tmp/xsched-ilp-XXXXXX";
  if (!mkdtemp(dir))
    return std::nullopt;
  const std::string lp = std::string(dir) + "/p.lp", out = std::string(dir) + "/out.txt";
  std::ofstream(lp) << toLpFormat(p);
  std::string cmd = solver == "glpsol" ? "glpsol --lp " + lp + " -o " + out + " >/dev/null 2>&1"
                                       : "cbc " + lp + " solve solu " + out + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  std::optional<double> value;
  std::ifstream in(out);
  std::string line;
  while (rc == 0 && std::getline(in, line)) {
    // glpsol: "Objective:  obj = 1.234 (MAXimum)"; cbc: "Optimal - objective value 1.234"
    auto at = line.find(solver == "glpsol" ? "obj = " : "objective value ");
    if (at != std::string::npos) {
      value = std::stod(line.substr(at + (solver == "glpsol" ? 6 : 16)));
      break;
    }
  }
  std::system(("rm -rf " + std::string(dir)).c_str());
  return value;
}

void crossCheckWithIlp(const std::string& solver) {
  if (std::system(("command -v " + solver + " >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << solver << " is not installed (scripts/install-deps.sh installs it)";
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    InstanceShape shape;
    shape.sites = 25 + static_cast<int>(seed % 20);
    shape.windows = 8 + static_cast<int>(seed % 10);
    shape.positions = 60;
    shape.memory_budget = seed % 2 == 0;
    shape.capacity_scale = 0.4;
    const Problem p = randomProblem(seed + 30000, shape);
    const Solution s = solve(p);
    ASSERT_TRUE(s.optimal);
    const auto ilp = ilpOptimum(p, solver);
    ASSERT_TRUE(ilp.has_value()) << solver << " gave no objective for seed " << seed;
    EXPECT_NEAR(s.gain, *ilp, 1e-6 * std::max(1.0, std::abs(*ilp))) << "seed " << seed;
  }
}

} // namespace

TEST(Solver, AgreesWithGlpk) {
  crossCheckWithIlp("glpsol");
}
TEST(Solver, AgreesWithCbc) {
  crossCheckWithIlp("cbc");
}
