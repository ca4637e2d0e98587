// Static offset planning: give every tensor an offset in one workspace so that no two tensors
// alive at the same time overlap, using as little workspace as possible. A portfolio of
// heuristics (greedy by size, by breadth and by size x sqrt(lifetime) with best gap, replay
// through the best-fit allocator, and the no-reuse baseline) keeps the smallest plan, and a
// local search over the placement order improves it; the lower bound (max over time of live
// bytes) says how close it is; an independent sweep-line verifier checks every plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xalloc/error.h"

namespace xalloc::memplan {

/// One tensor to place: alive from op `first_op` through op `last_op`, inclusive.
struct TensorSpec {
  std::string id;
  std::int64_t size = 0;
  std::int64_t first_op = 0;
  std::int64_t last_op = 0;
  std::int64_t alignment = 0;               // 0: the plan's default
  std::optional<std::int64_t> fixed_offset; // a pinned tensor keeps this offset
};

struct PlanOptions {
  std::int64_t alignment = 64; // default alignment of offsets (and so of sizes)
  bool verify = false;         // run the verifier on every plan (always on in debug builds)
  /// Local-search steps after the greedy portfolio; -1 scales them with the instance
  /// (min(1000, 400000 / n)). Deterministic either way.
  int search_iterations = -1;
};

struct Plan {
  std::vector<std::int64_t> offsets; // one per tensor, in input order
  std::int64_t workspace_bytes = 0;
  std::int64_t lower_bound_bytes = 0;
  std::string heuristic;
  /// Every heuristic the portfolio ran, with its workspace (0 when it could not run).
  std::vector<std::pair<std::string, std::int64_t>> tried;
  double ratio() const {
    return lower_bound_bytes > 0 ? static_cast<double>(workspace_bytes) / lower_bound_bytes : 1.0;
  }
};

/// A plan does not fit a memory budget.
class OutOfMemory : public Error {
public:
  OutOfMemory(std::int64_t needed, std::int64_t lower_bound, std::int64_t budget);
  std::int64_t needed() const { return needed_; }
  std::int64_t budget() const { return budget_; }

private:
  std::int64_t needed_, budget_;
};

/// Checks a tensor list (sizes >= 0, last >= first, alignment >= 0, unique ids); "" or the problem.
std::string validateTensors(const std::vector<TensorSpec>& tensors);

/// Max over time of the sum of live (aligned) sizes: no plan can use less.
std::int64_t lowerBound(const std::vector<TensorSpec>& tensors, const PlanOptions& options = {});

/// Heuristics; each O(n log n) plus the overlaps it inspects. Pinned tensors keep their offsets.
Plan planGreedyBySize(const std::vector<TensorSpec>& tensors, const PlanOptions& options = {});
Plan planGreedyByBreadth(const std::vector<TensorSpec>& tensors, const PlanOptions& options = {});
/// Placement in a caller-given order (tensor indices): the engine of the greedy plans. Each
/// tensor goes into the smallest gap that holds it over its lifetime (or, with `first_fit`, the
/// lowest), else above everything alive with it.
Plan planBestGapInOrder(const std::vector<TensorSpec>& tensors, const std::vector<int>& order,
                        const PlanOptions& options, const std::string& name,
                        bool first_fit = false);
/// nullopt when a pinned tensor's range is taken at its first op (replay cannot honour it).
std::optional<Plan> planReplay(const std::vector<TensorSpec>& tensors,
                               const PlanOptions& options = {});

/// Every tensor its own bytes, one after another: the baseline a plan must never exceed.
Plan planNoReuse(const std::vector<TensorSpec>& tensors, const PlanOptions& options = {});

/// Runs every heuristic (and the no-reuse baseline), keeps the smallest workspace (the first on
/// ties), then improves the best order-based plan by local search.
Plan planMemory(const std::vector<TensorSpec>& tensors, const PlanOptions& options = {});

/// Independent check of a plan: alignment, pinned offsets, bounds, and no two tensors alive at
/// the same time overlapping (sweep line). "" when valid, else the first violation.
std::string verifyPlan(const std::vector<TensorSpec>& tensors, const Plan& plan,
                       const PlanOptions& options = {});

/// Bytes a plan needs.
inline std::int64_t estimateMemory(const Plan& plan) {
  return plan.workspace_bytes;
}

/// Throws OutOfMemory (with the numbers) when the plan needs more than `budget` bytes.
void requireWithinBudget(const Plan& plan, std::int64_t budget);

} // namespace xalloc::memplan
