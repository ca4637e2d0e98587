// Storage lifetimes, conversion copies and the activation peak they make.
#include <algorithm>

#include "memory_internal.h"
#include "xalloc/scheduler/decide.h"

namespace xalloc::scheduler {

using formats::Action;
using formats::Decision;
using formats::Profile;
using formats::Record;

namespace {

// A remove decision's conversion output and input, when the conversion allocates a copy of its
// own (nullopt for a no-op conversion, which allocates nothing, or an unrecorded one).
std::optional<std::pair<const Record*, const Record*>> removedCopy(const Profile& p,
                                                                   const Decision& d) {
  const Record* r = p.findRecord(d.value_id);
  const formats::Op* conv = p.findOp(d.producer);
  const Record* src = conv && !conv->inputs.empty() ? p.findRecord(conv->inputs.front()) : nullptr;
  if (!r || !src || src->storage_id == r->storage_id)
    return std::nullopt;
  return std::make_pair(r, src);
}

} // namespace

// One interval per storage: from its first producer to the last use of any view of it.
Storages storagesOf(const Profile& p) {
  Storages s;
  for (const auto& op : p.ops)
    s.positions = std::max(s.positions, op.id + 1);
  for (const Record& r : p.records) {
    s.positions = std::max(s.positions, r.last_use + 1);
    if (r.origin == formats::Origin::Attribute || r.origin == formats::Origin::Constant ||
        r.module_storage)
      continue; // weights, buffers, constants and their views live for the whole program
    auto [it, fresh] = s.intervals.try_emplace(
        r.storage_id, memplan::Interval{r.first_use, r.last_use, r.storage_bytes});
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.first_use);
      it->second.last = std::max(it->second.last, r.last_use);
    }
  }
  return s;
}

const formats::IdleEvent* findWindow(const Profile& p, std::int64_t id) {
  for (const auto& w : p.gpu_idle_events)
    if (w.id == id)
      return &w;
  return nullptr;
}

// The converted copy of a sync or async decision: from its allocation to the value's last use.
std::optional<memplan::Interval> copyInterval(const Profile& p, const Decision& d) {
  const Record* r = p.findRecord(d.value_id);
  if (!r || d.consumers.empty() || r->origin == formats::Origin::Constant)
    return std::nullopt; // a constant's copy is made once, into the model: no activation
  auto [lo, hi] = std::minmax_element(d.consumers.begin(), d.consumers.end());
  std::int64_t first = *lo;
  if (d.action == Action::Async && d.window_id)
    if (const auto* w = findWindow(p, *d.window_id))
      first = std::min(first, w->after_op_id + 1);
  return memplan::Interval{first, std::max(*hi, r->last_use), r->bytes};
}

// Removing a conversion frees its output's storage and keeps its input alive until the output's
// last use.
std::vector<MemDelta> removeDeltas(const Profile& p, const Storages& st, const Decision& d) {
  const auto copy = removedCopy(p, d);
  if (!copy)
    return {};
  const auto [r, src] = *copy;
  std::vector<MemDelta> out;
  if (auto it = st.intervals.find(r->storage_id); it != st.intervals.end())
    out.push_back({it->second.first, it->second.last, -it->second.bytes});
  if (auto it = st.intervals.find(src->storage_id);
      it != st.intervals.end() && r->last_use > it->second.last)
    out.push_back({it->second.last + 1, r->last_use, it->second.bytes});
  return out;
}

std::int64_t predictedPeakBytes(const Profile& p, const std::vector<Decision>& decisions) {
  return predictedPeakBytes(p, storagesOf(p), decisions);
}

std::int64_t predictedPeakBytes(const Profile& p, const Storages& base,
                                const std::vector<Decision>& decisions) {
  Storages st = base;
  std::vector<memplan::Interval> extra;
  for (const Decision& d : decisions) {
    if (d.action == Action::Sync || d.action == Action::Async) {
      if (auto iv = copyInterval(p, d))
        extra.push_back(*iv);
    } else if (d.action == Action::Remove) {
      const auto copy = removedCopy(p, d);
      if (!copy)
        continue;
      const auto [r, src] = *copy;
      st.intervals.erase(r->storage_id);
      auto it = st.intervals.find(src->storage_id);
      if (it != st.intervals.end())
        it->second.last = std::max(it->second.last, r->last_use);
    }
  }
  std::vector<memplan::Interval> all;
  for (const auto& [id, iv] : st.intervals)
    all.push_back(iv);
  all.insert(all.end(), extra.begin(), extra.end());
  return memplan::peakLiveBytes(all);
}

} // namespace xalloc::scheduler
