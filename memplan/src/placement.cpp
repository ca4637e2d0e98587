// Best-gap placement: a time axis compressed to the moments the live set changes, an index of
// the tensors alive at each moment (LiveIndex), and the placement that uses it.
#include "placement.h"

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

namespace xalloc::memplan::detail {

std::int64_t alignmentOf(const TensorSpec& t, const PlanOptions& o) {
  return t.alignment > 0 ? t.alignment : o.alignment;
}

// Bytes a tensor occupies in the workspace: its size rounded up to its alignment.
std::int64_t footprint(const TensorSpec& t, const PlanOptions& o) {
  return alignUp(t.size, alignmentOf(t, o));
}

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
                  const PlanOptions& o, const std::string& name, bool first_fit) {
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

} // namespace xalloc::memplan::detail
