// The static planner's checks: tensors validated before planning, every plan verified by an
// independent sweep, and the budget enforced with the numbers.
#include "xalloc/memplan/planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <unordered_set>

#include "xalloc/best_fit.h"
#include "xalloc/memplan/liveness.h"

#include "placement.h"

namespace xalloc::memplan {

using detail::alignmentOf;
using detail::footprint;

OutOfMemory::OutOfMemory(std::int64_t needed, std::int64_t lower_bound, std::int64_t budget)
    : Error("out of memory: the plan needs " + std::to_string(needed) +
            " bytes (no plan can use less than " + std::to_string(lower_bound) +
            ") but the budget is " + std::to_string(budget) + " bytes"),
      needed_(needed), budget_(budget) {}

std::string validateTensors(const std::vector<TensorSpec>& ts) {
  std::unordered_set<std::string> ids;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    const std::string who = "tensor '" + t.id + "'";
    if (t.size < 0)
      return who + " has a negative size";
    if (t.first_op < 0)
      return who + " has a negative first_op";
    if (t.last_op < t.first_op)
      return who + ": last_op " + std::to_string(t.last_op) + " is before first_op " +
             std::to_string(t.first_op);
    if (t.alignment < 0)
      return who + " has a negative alignment";
    if (t.fixed_offset && *t.fixed_offset < 0)
      return who + " has a negative fixed offset";
    if (!ids.insert(t.id).second)
      return "duplicate tensor id '" + t.id + "'";
  }
  // Pinned tensors must not collide with each other: check them as a plan of their own.
  std::vector<TensorSpec> pinned;
  Plan pins;
  for (const auto& t : ts)
    if (t.fixed_offset) {
      pinned.push_back(t);
      pins.offsets.push_back(*t.fixed_offset);
      pins.workspace_bytes = std::max(pins.workspace_bytes, *t.fixed_offset + t.size);
    }
  PlanOptions raw;
  raw.alignment = 1; // the caller chose these offsets; only overlaps matter here
  for (auto& t : pinned)
    t.alignment = 1;
  if (std::string clash = verifyPlan(pinned, pins, raw); !clash.empty())
    return "pinned " + clash;
  return "";
}

std::string verifyPlan(const std::vector<TensorSpec>& ts, const Plan& plan, const PlanOptions& o) {
  if (plan.offsets.size() != ts.size())
    return "the plan has " + std::to_string(plan.offsets.size()) + " offsets for " +
           std::to_string(ts.size()) + " tensors";
  std::vector<int> order;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    const std::int64_t off = plan.offsets[i];
    if (off < 0 || off % alignmentOf(t, o) != 0)
      return "tensor '" + t.id + "' has a misaligned offset " + std::to_string(off);
    if (t.fixed_offset && off != *t.fixed_offset)
      return "pinned tensor '" + t.id + "' moved to " + std::to_string(off);
    if (footprint(t, o) == 0)
      continue;
    if (off + footprint(t, o) > plan.workspace_bytes)
      return "tensor '" + t.id + "' ends past the workspace";
    order.push_back(static_cast<int>(i));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return ts[static_cast<std::size_t>(a)].first_op < ts[static_cast<std::size_t>(b)].first_op;
  });
  // Sweep over time: the tensors alive now, by offset. Live tensors never overlap, so checking a
  // new tensor against its neighbours by offset checks it against all of them.
  std::map<std::int64_t, int> active; // offset -> tensor
  using Ending = std::pair<std::int64_t, int>;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> ending;
  for (int i : order) {
    const auto& t = ts[static_cast<std::size_t>(i)];
    while (!ending.empty() && ending.top().first < t.first_op) {
      active.erase(plan.offsets[static_cast<std::size_t>(ending.top().second)]);
      ending.pop();
    }
    const std::int64_t off = plan.offsets[static_cast<std::size_t>(i)];
    const std::int64_t end = off + footprint(t, o);
    auto next = active.lower_bound(off);
    auto clash = [&](int j) {
      return "tensors '" + ts[static_cast<std::size_t>(j)].id + "' and '" + t.id +
             "' are alive at the same time and overlap";
    };
    if (next != active.end() && next->first < end)
      return clash(next->second);
    if (next != active.begin()) {
      auto prev = std::prev(next);
      const auto& u = ts[static_cast<std::size_t>(prev->second)];
      if (prev->first + footprint(u, o) > off)
        return clash(prev->second);
    }
    active.emplace(off, i);
    ending.emplace(t.last_op, i);
  }
  return "";
}

void requireWithinBudget(const Plan& plan, std::int64_t budget) {
  if (plan.workspace_bytes > budget)
    throw OutOfMemory(plan.workspace_bytes, plan.lower_bound_bytes, budget);
}

} // namespace xalloc::memplan
