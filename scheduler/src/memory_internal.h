// The memory side of xsched, shared by the decisions and the problem built from them: storage
// lifetimes from a profile, the copy a conversion makes, what removing one frees.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "xalloc/formats/profile.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/memplan/liveness.h"
#include "xalloc/scheduler/problem.h"

namespace xalloc::scheduler {

// Positions are op ids: the profile lists ops in execution order with ids 0..n-1.
struct Storages {
  std::map<std::int64_t, memplan::Interval> intervals; // by storage id
  std::int64_t positions = 0;
};

/// One interval per storage: from its first producer to the last use of any view of it. The
/// module's memory (weights, buffers, constants and their views) is left out.
Storages storagesOf(const formats::Profile& p);

/// The idle window with this id; nullptr when there is none.
const formats::IdleEvent* findWindow(const formats::Profile& p, std::int64_t id);

/// The converted copy of a sync or async decision: from its allocation to the value's last use
/// (nullopt for a constant, stored once in the model).
std::optional<memplan::Interval> copyInterval(const formats::Profile& p,
                                              const formats::Decision& d);

/// predictedPeakBytes over storages computed once (storagesOf(p)).
std::int64_t predictedPeakBytes(const formats::Profile& p, const Storages& base,
                                const std::vector<formats::Decision>& decisions);

/// Removing a conversion frees its output's storage and keeps its input alive until the
/// output's last use.
std::vector<MemDelta> removeDeltas(const formats::Profile& p, const Storages& st,
                                   const formats::Decision& d);

} // namespace xalloc::scheduler
