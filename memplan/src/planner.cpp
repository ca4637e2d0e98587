// The static planner's heuristics, lower bound, verifier and budget check.
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

#include "xalloc/memplan/best_fit.h"
#include "xalloc/memplan/liveness.h"

namespace xalloc::memplan {

OutOfMemory::OutOfMemory(std::int64_t needed, std::int64_t lower_bound, std::int64_t budget)
    : Error("out of memory: the plan needs " + std::to_string(needed) +
            " bytes (no plan can use less than " + std::to_string(lower_bound) +
            ") but the budget is " + std::to_string(budget) + " bytes"),
      needed_(needed), budget_(budget) {}

namespace {

std::int64_t alignmentOf(const TensorSpec& t, const PlanOptions& o) {
  return t.alignment > 0 ? t.alignment : o.alignment;
}

// Bytes a tensor occupies in the workspace: its size rounded up to its alignment.
std::int64_t footprint(const TensorSpec& t, const PlanOptions& o) {
  return alignUp(t.size, alignmentOf(t, o));
}

// Compressed time: the distinct first_op values and last_op + 1 values, so that the set of live
// tensors is constant between consecutive points.
struct TimeAxis {
  std::vector<std::int64_t> points;
  explicit TimeAxis(const std::vector<TensorSpec>& ts) {
    points.reserve(ts.size() * 2);
    for (const auto& t : ts) {
      points.push_back(t.first_op);
      points.push_back(t.last_op + 1);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
  }
  std::size_t size() const { return points.size(); }
  // Index of the interval [points[i], points[i+1]) holding time t.
  std::size_t at(std::int64_t t) const {
    return static_cast<std::size_t>(std::upper_bound(points.begin(), points.end(), t) -
                                    points.begin()) -
           1;
  }
};

// Placed tensors, queryable by "which of them are alive at some time in [first, last]": the
// ones alive at `first` (a segment tree answers point stabbing in O(log T + k)) plus the ones that
// start inside (first, last] (per-slot lists, with a bitmap to skip empty slots 64 at a time).
// Lists are intrusive (index arrays), so inserting allocates nothing per node.
class LiveIndex {
public:
  explicit LiveIndex(std::size_t slots, std::size_t expected) : n_(1) {
    while (n_ < std::max<std::size_t>(slots, 1))
      n_ <<= 1;
    tree_head_.assign(2 * n_, -1);
    start_head_.assign(n_, -1);
    start_bits_.assign(n_ / 64 + 1, 0);
    next_.reserve(expected * 4);
    id_.reserve(expected * 4);
  }
  void insert(int id, std::size_t a, std::size_t b) { // slots [a, b] inclusive
    push(start_head_[a], id);
    start_bits_[a / 64] |= std::uint64_t{1} << (a % 64);
    for (std::size_t lo = a + n_, hi = b + n_ + 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1)
        push(tree_head_[lo++], id);
      if (hi & 1)
        push(tree_head_[--hi], id);
    }
  }
  template <class F> void forOverlapping(std::size_t a, std::size_t b, F&& f) const {
    for (std::size_t node = a + n_; node >= 1; node >>= 1)
      for (int e = tree_head_[node]; e >= 0; e = next_[static_cast<std::size_t>(e)])
        f(id_[static_cast<std::size_t>(e)]);
    for (std::size_t slot = a + 1; slot <= b;) {
      std::uint64_t word = start_bits_[slot / 64] >> (slot % 64);
      if (word == 0) {
        slot = (slot / 64 + 1) * 64;
        continue;
      }
      slot += static_cast<std::size_t>(__builtin_ctzll(word));
      if (slot > b)
        break;
      for (int e = start_head_[slot]; e >= 0; e = next_[static_cast<std::size_t>(e)])
        f(id_[static_cast<std::size_t>(e)]);
      ++slot;
    }
  }

private:
  void push(int& head, int id) {
    next_.push_back(head);
    id_.push_back(id);
    head = static_cast<int>(next_.size()) - 1;
  }
  std::size_t n_;
  std::vector<int> tree_head_, start_head_, next_, id_;
  std::vector<std::uint64_t> start_bits_;
};

// Places tensors in `order` at the smallest gap (among tensors overlapping in time) that holds
// them, or above all of them. Pinned tensors are placed first at their offsets.
Plan placeBestGap(const std::vector<TensorSpec>& ts, const std::vector<int>& order,
                  const PlanOptions& o, const std::string& name, bool first_fit = false) {
  Plan plan;
  plan.heuristic = name;
  const std::size_t n = ts.size();
  plan.offsets.assign(n, 0);
  TimeAxis axis(ts);
  // Per-tensor facts computed once: footprint, alignment and time slots.
  std::vector<std::int64_t> fp(n), al(n);
  std::vector<std::size_t> sa(n), sb(n);
  for (std::size_t i = 0; i < n; ++i) {
    al[i] = alignmentOf(ts[i], o);
    fp[i] = alignUp(ts[i].size, al[i]);
    sa[i] = axis.at(ts[i].first_op);
    sb[i] = axis.at(ts[i].last_op);
  }
  LiveIndex index(axis.size(), n);
  std::vector<char> placed(n, 0);
  auto place = [&](std::size_t i, std::int64_t offset) {
    plan.offsets[i] = offset;
    placed[i] = 1;
    index.insert(static_cast<int>(i), sa[i], sb[i]);
    plan.workspace_bytes = std::max(plan.workspace_bytes, offset + fp[i]);
  };
  for (std::size_t i = 0; i < n; ++i)
    if (ts[i].fixed_offset)
      place(i, *ts[i].fixed_offset);
  std::vector<std::pair<std::int64_t, std::int64_t>> busy; // (offset, end) of overlapping tensors
  for (int oi : order) {
    const auto i = static_cast<std::size_t>(oi);
    if (placed[i] || fp[i] == 0)
      continue;
    busy.clear();
    index.forOverlapping(sa[i], sb[i], [&](int j) {
      const std::int64_t off = plan.offsets[static_cast<std::size_t>(j)];
      busy.emplace_back(off, off + fp[static_cast<std::size_t>(j)]);
    });
    std::sort(busy.begin(), busy.end());
    std::int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const auto& [start, end] : busy) {
      if (start > cursor && start - cursor < best_gap) {
        const std::int64_t at = alignUp(cursor, al[i]);
        if (at + fp[i] <= start) {
          best = at;
          best_gap = start - cursor;
          if (first_fit)
            break;
        }
      }
      cursor = std::max(cursor, end);
    }
    place(i, best >= 0 ? best : alignUp(cursor, al[i]));
  }
  return plan;
}

std::vector<int> identity(std::size_t n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

} // namespace

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
