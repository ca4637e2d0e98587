// The scheduling problem as numbers, apart from any profile: sites with options, idle windows
// with capacities, and a memory budget over op positions. `solve` finds the plan with the largest
// predicted gain: exactly (branch and bound, seeded with a greedy plan) when it finishes within
// its limits, otherwise the best plan found with a bound on what it may have missed.
//
// Gains are in ms of predicted model time. An option that needs a window (async) loads it with the
// conversion's predicted time; the load of a window never exceeds its capacity. Options change
// live memory by a list of interval deltas; the peak of the base live memory plus the chosen
// deltas never exceeds the budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xalloc::scheduler {

/// `bytes` (may be negative) added to live memory at op positions first..last inclusive.
struct MemDelta {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t bytes = 0;
};

struct Option {
  int kind = 0;    // caller's tag (the Action); not used by the solver
  int window = -1; // index into Problem::windows, or -1 when the option needs none
  double gain = 0; // predicted ms saved
  double load = 0; // ms of the window's capacity it uses (window >= 0 only)
  std::vector<MemDelta> memory;
};

/// Option 0 of every site must be "leave it": gain 0, no window, no memory.
struct Site {
  std::vector<Option> options;
};

struct Problem {
  std::vector<Site> sites;
  std::vector<double> window_capacity; // ms, after the safety factor
  std::vector<std::int64_t> base_live; // live bytes at each op position without any decision
  std::optional<std::int64_t> memory_budget;
};

struct SolveLimits {
  std::int64_t node_limit = 2'000'000;
  double time_limit_ms = 1000;
};

struct Solution {
  std::vector<int> choice; // option index per site
  double gain = 0;         // of `choice`
  double bound = 0;        // no feasible plan gains more than this
  bool optimal = false;    // the search finished: gain == the optimum
  std::int64_t nodes = 0;  // branch-and-bound nodes visited
  std::string method;      // "branch-and-bound", "greedy", "brute force"
  /// The relative gap (bound - gain) / bound; 0 when optimal.
  double gap() const;
};

/// Throws LogicError when option 0 of a site is not the empty option, a window index is out of
/// range, or a number is not finite.
void checkProblem(const Problem& p);

/// The plan's gain, or nullopt when it breaks a window capacity or the memory budget.
std::optional<double> evaluate(const Problem& p, const std::vector<int>& choice);

/// Peak live bytes of a plan (base plus its deltas).
std::int64_t planPeak(const Problem& p, const std::vector<int>& choice);

/// Best option per site by gain, repaired in order of gain per unit of what it uses until the
/// plan is feasible. Always feasible (the all-zero plan is, when the base fits the budget).
Solution greedy(const Problem& p);

/// Branch and bound seeded with `greedy`. Independent groups of sites (sharing no window, and
/// all of them when there is no memory budget) are solved separately.
Solution solve(const Problem& p, const SolveLimits& limits = {});

/// Every combination of options (tests; small problems only).
Solution bruteForce(const Problem& p);

/// The problem as a mixed-integer program in CPLEX LP format (for glpsol or cbc in tests):
/// binary x_i_k per site and option, maximise the gain.
std::string toLpFormat(const Problem& p);

} // namespace xalloc::scheduler
