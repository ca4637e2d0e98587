// The static planner's heuristics: placement orders (size, breadth, area), the local search
// over orders, replay through the best-fit allocator, the no-reuse baseline, and planMemory,
// which keeps the best of them.
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
using detail::identity;
using detail::placeBestGap;
using detail::TimeAxis;

Plan planBestGapInOrder(const std::vector<TensorSpec>& ts, const std::vector<int>& order,
                        const PlanOptions& o, const std::string& name, bool first_fit) {
  Plan p = placeBestGap(ts, order, o, name, first_fit);
  p.lower_bound_bytes = lowerBound(ts, o);
  return p;
}

std::int64_t lowerBound(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  std::vector<Interval> iv;
  iv.reserve(ts.size());
  for (const auto& t : ts)
    iv.push_back({t.first_op, t.last_op, footprint(t, o)});
  return peakLiveBytes(iv);
}

namespace {

// Largest first (ties: longer-lived first).
std::vector<int> sizeOrder(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  std::vector<int> order = identity(ts.size());
  std::vector<std::int64_t> fp(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i)
    fp[i] = footprint(ts[i], o);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto x = static_cast<std::size_t>(a), y = static_cast<std::size_t>(b);
    if (fp[x] != fp[y])
      return fp[x] > fp[y];
    return ts[x].last_op - ts[x].first_op > ts[y].last_op - ts[y].first_op;
  });
  return order;
}

// Tensors of the widest moments (most bytes alive) first, largest first among them.
std::vector<int> breadthOrder(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  TimeAxis axis(ts);
  const std::size_t T = axis.size();
  std::vector<std::int64_t> breadth(T + 1, 0);
  for (const auto& t : ts) {
    breadth[axis.at(t.first_op)] += footprint(t, o);
    breadth[axis.at(t.last_op) + 1] -= footprint(t, o);
  }
  for (std::size_t i = 1; i <= T; ++i)
    breadth[i] += breadth[i - 1];
  // Range maximum over slots: an iterative segment tree (O(T) memory, O(log T) a query).
  std::size_t n = 1;
  while (n < std::max<std::size_t>(T, 1))
    n <<= 1;
  std::vector<std::int64_t> tree(2 * n, 0);
  for (std::size_t i = 0; i < T; ++i)
    tree[n + i] = breadth[i];
  for (std::size_t i = n; i-- > 1;)
    tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
  auto rangeMax = [&](std::size_t a, std::size_t b) {
    std::int64_t best = 0;
    for (std::size_t lo = a + n, hi = b + n + 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1)
        best = std::max(best, tree[lo++]);
      if (hi & 1)
        best = std::max(best, tree[--hi]);
    }
    return best;
  };
  std::vector<std::int64_t> key(ts.size()), fp(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    key[i] = rangeMax(axis.at(ts[i].first_op), axis.at(ts[i].last_op));
    fp[i] = footprint(ts[i], o);
  }
  std::vector<int> order = identity(ts.size());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto x = static_cast<std::size_t>(a), y = static_cast<std::size_t>(b);
    if (key[x] != key[y])
      return key[x] > key[y];
    return fp[x] > fp[y];
  });
  return order;
}

// Size weighted by the square root of the lifetime: long-lived tensors move up the order, so
// they get low offsets before short-lived ones fragment the space they would need.
std::vector<int> areaOrder(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  std::vector<double> key(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i)
    key[i] = static_cast<double>(footprint(ts[i], o)) *
             std::sqrt(static_cast<double>(ts[i].last_op - ts[i].first_op + 1));
  std::vector<int> order = identity(ts.size());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return key[static_cast<std::size_t>(a)] > key[static_cast<std::size_t>(b)];
  });
  return order;
}

// Local search over the placement order: a tensor that ends at the top of the workspace (or one
// alive with it) moves to a random earlier position; the new order is kept when the workspace
// does not grow. Deterministic (fixed seed); stops at the lower bound.
Plan searchOrders(const std::vector<TensorSpec>& ts, std::vector<int> order, Plan current,
                  const PlanOptions& o, int iterations) {
  std::mt19937 rng(12345);
  std::vector<std::int64_t> fp(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i)
    fp[i] = footprint(ts[i], o);
  std::vector<int> position(ts.size());
  std::vector<int> tops, alive;
  for (int it = 0; it < iterations && current.workspace_bytes > current.lower_bound_bytes; ++it) {
    tops.clear();
    for (std::size_t i = 0; i < ts.size(); ++i)
      if (fp[i] > 0 && !ts[i].fixed_offset && current.offsets[i] + fp[i] == current.workspace_bytes)
        tops.push_back(static_cast<int>(i));
    if (tops.empty())
      break; // the top is a pinned tensor: nothing to move
    int victim = tops[rng() % tops.size()];
    if (rng() % 2) { // or a tensor alive at the same time as the top one
      alive.clear();
      const auto& v = ts[static_cast<std::size_t>(victim)];
      for (std::size_t j = 0; j < ts.size(); ++j)
        if (ts[j].first_op <= v.last_op && v.first_op <= ts[j].last_op)
          alive.push_back(static_cast<int>(j));
      victim = alive[rng() % alive.size()];
    }
    for (std::size_t k = 0; k < order.size(); ++k)
      position[static_cast<std::size_t>(order[k])] = static_cast<int>(k);
    const auto from = static_cast<std::size_t>(position[static_cast<std::size_t>(victim)]);
    if (from == 0)
      continue;
    const std::size_t to = rng() % from;
    std::vector<int> candidate = order;
    candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(from));
    candidate.insert(candidate.begin() + static_cast<std::ptrdiff_t>(to), victim);
    Plan p = placeBestGap(ts, candidate, o, current.heuristic);
    if (p.workspace_bytes <= current.workspace_bytes) {
      p.lower_bound_bytes = current.lower_bound_bytes;
      current = std::move(p);
      order = std::move(candidate);
    }
  }
  return current;
}

} // namespace

Plan planGreedyBySize(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  Plan p = placeBestGap(ts, sizeOrder(ts, o), o, "greedy-by-size");
  p.lower_bound_bytes = lowerBound(ts, o);
  return p;
}

Plan planGreedyByBreadth(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  Plan p = placeBestGap(ts, breadthOrder(ts, o), o, "greedy-by-breadth");
  p.lower_bound_bytes = lowerBound(ts, o);
  return p;
}

std::optional<Plan> planReplay(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  Plan plan;
  plan.heuristic = "best-fit-replay";
  plan.offsets.assign(ts.size(), 0);
  std::int64_t base = o.alignment;
  for (const auto& t : ts)
    base = std::gcd(base, alignmentOf(t, o));
  BestFitAllocator alloc(std::max<std::int64_t>(base, 1));
  // Allocate in time order (largest first at the same op); free after the last use.
  std::vector<int> order = identity(ts.size());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& x = ts[static_cast<std::size_t>(a)];
    const auto& y = ts[static_cast<std::size_t>(b)];
    if (x.first_op != y.first_op)
      return x.first_op < y.first_op;
    return footprint(x, o) > footprint(y, o);
  });
  using Ending = std::pair<std::int64_t, int>; // (last_op, tensor)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> live;
  for (int i : order) {
    const auto& t = ts[static_cast<std::size_t>(i)];
    while (!live.empty() && live.top().first < t.first_op) {
      const int j = live.top().second;
      live.pop();
      alloc.free(plan.offsets[static_cast<std::size_t>(j)],
                 footprint(ts[static_cast<std::size_t>(j)], o));
    }
    const std::int64_t need = footprint(t, o);
    if (need == 0)
      continue;
    if (t.fixed_offset) {
      if (!alloc.reserve(*t.fixed_offset, need))
        return std::nullopt;
      plan.offsets[static_cast<std::size_t>(i)] = *t.fixed_offset;
    } else {
      plan.offsets[static_cast<std::size_t>(i)] = alloc.alloc(need, alignmentOf(t, o));
    }
    live.emplace(t.last_op, i);
  }
  plan.workspace_bytes = alloc.workspace();
  plan.lower_bound_bytes = lowerBound(ts, o);
  return plan;
}

Plan planNoReuse(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  Plan plan;
  plan.heuristic = "no-reuse";
  plan.offsets.assign(ts.size(), 0);
  for (const auto& t : ts)
    if (t.fixed_offset)
      plan.workspace_bytes = std::max(plan.workspace_bytes, *t.fixed_offset + footprint(t, o));
  // Most-aligned first, so that no padding is needed between tensors.
  std::vector<int> order = identity(ts.size());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return alignmentOf(ts[static_cast<std::size_t>(a)], o) >
           alignmentOf(ts[static_cast<std::size_t>(b)], o);
  });
  for (int i : order) {
    const auto& t = ts[static_cast<std::size_t>(i)];
    if (t.fixed_offset) {
      plan.offsets[static_cast<std::size_t>(i)] = *t.fixed_offset;
      continue;
    }
    const std::int64_t at = alignUp(plan.workspace_bytes, alignmentOf(t, o));
    plan.offsets[static_cast<std::size_t>(i)] = at;
    plan.workspace_bytes = at + footprint(t, o);
  }
  plan.lower_bound_bytes = lowerBound(ts, o);
  return plan;
}

Plan planMemory(const std::vector<TensorSpec>& ts, const PlanOptions& o) {
  XALLOC_EXPECTS(o.alignment >= 1, "alignment must be positive");
  const std::int64_t lb = lowerBound(ts, o);
  struct Candidate {
    Plan plan;
    std::vector<int> order; // empty for plans that do not come from an order
  };
  std::vector<Candidate> candidates;
  auto fromOrder = [&](std::vector<int> order, const char* name) {
    Plan p = placeBestGap(ts, order, o, name);
    p.lower_bound_bytes = lb;
    candidates.push_back({std::move(p), std::move(order)});
  };
  fromOrder(sizeOrder(ts, o), "greedy-by-size");
  fromOrder(breadthOrder(ts, o), "greedy-by-breadth");
  fromOrder(areaOrder(ts, o), "greedy-by-area");
  if (std::optional<Plan> replay = planReplay(ts, o))
    candidates.push_back({std::move(*replay), {}});
  // The baseline: never worse than giving every tensor its own bytes.
  candidates.push_back({planNoReuse(ts, o), {}});
  std::vector<std::pair<std::string, std::int64_t>> tried;
  tried.reserve(candidates.size() + 1);
  for (const auto& c : candidates)
    tried.emplace_back(c.plan.heuristic, c.plan.workspace_bytes);
  if (tried.size() == 4)
    tried.insert(tried.begin() + 3, {"best-fit-replay", 0}); // replay could not honour a pin
  auto best = std::min_element(candidates.begin(), candidates.end(),
                               [](const Candidate& a, const Candidate& b) {
                                 return a.plan.workspace_bytes < b.plan.workspace_bytes;
                               });
  Plan result = best->plan; // a copy: the search below may start from the same candidate
  // Improve the best order-based plan by local search, with a budget that keeps large
  // instances fast (the search re-places every tensor on each step).
  const int iterations = o.search_iterations >= 0
                             ? o.search_iterations
                             : static_cast<int>(std::min<std::size_t>(
                                   1000, 400000 / std::max<std::size_t>(ts.size(), 1)));
  if (iterations > 0 && result.workspace_bytes > lb) {
    const Candidate* start = nullptr;
    for (const auto& c : candidates)
      if (!c.order.empty() && (!start || c.plan.workspace_bytes < start->plan.workspace_bytes))
        start = &c;
    if (start) {
      Plan searched = searchOrders(ts, start->order, start->plan, o, iterations);
      tried.emplace_back(searched.heuristic + "+search", searched.workspace_bytes);
      if (searched.workspace_bytes < result.workspace_bytes) {
        result = std::move(searched);
        result.heuristic += "+search";
      }
    }
  }
  result.lower_bound_bytes = lb;
  result.tried = std::move(tried);
#ifndef NDEBUG
  const bool verify = true;
#else
  const bool verify = o.verify;
#endif
  if (verify) {
    std::string problem = verifyPlan(ts, result, o);
    XALLOC_EXPECTS(problem.empty(), "planner produced an invalid plan: " + problem);
  }
  return result;
}

} // namespace xalloc::memplan
