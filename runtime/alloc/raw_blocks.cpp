// The registry of raw_blocks.h: arenas as address ranges, and single blocks in shards by
// address, each a mutex and a map, so threads that allocate at once rarely wait on each other.
#include "raw_blocks.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <pthread.h>

#include <c10/core/CPUAllocator.h>

namespace xalloc::runtime::detail {

namespace {

struct Shard {
  std::mutex mu;
  std::unordered_map<const void*, c10::DeleterFnPtr> blocks;
};

constexpr std::size_t kShards = 64;

// Around fork(): every lock of the registry taken before, released after in parent and child,
// so a child (a DataLoader worker) never inherits one held by a thread it does not have: the
// graceful allocator takes one on every allocation and free.
void lockForFork();
void unlockAfterFork();

// Never destroyed: blocks may be freed while static destructors run.
std::array<Shard, kShards>& shards() {
  static auto* s = [] {
    auto* made = new std::array<Shard, kShards>;
    ::pthread_atfork(&lockForFork, &unlockAfterFork, &unlockAfterFork);
    return made;
  }();
  return *s;
}

Shard& shardOf(const void* p) {
  // Blocks are 64-byte aligned; the bits above the alignment spread them.
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return shards()[((a >> 6) ^ (a >> 12) ^ (a >> 20)) % kShards];
}

// Arenas: few, looked up first (a range test each).
struct Ranges {
  std::mutex mu;
  std::vector<std::tuple<std::uintptr_t, std::uintptr_t, c10::DeleterFnPtr>> spans;
};
Ranges& ranges() {
  static auto* r = (shards(), new Ranges); // the shards first: their fork handlers cover both
  return *r;
}

void lockForFork() {
  ranges().mu.lock();
  for (Shard& s : shards())
    s.mu.lock();
}

void unlockAfterFork() {
  for (Shard& s : shards())
    s.mu.unlock();
  ranges().mu.unlock();
}

c10::DeleterFnPtr rangeDeleter(const void* data) {
  const auto a = reinterpret_cast<std::uintptr_t>(data);
  Ranges& r = ranges();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [lo, hi, deleter] : r.spans)
    if (a >= lo && a < hi)
      return deleter;
  return nullptr;
}

} // namespace

void noteRawRange(const void* base, std::size_t bytes, c10::DeleterFnPtr deleter) {
  const auto lo = reinterpret_cast<std::uintptr_t>(base);
  Ranges& r = ranges();
  std::lock_guard<std::mutex> lock(r.mu);
  r.spans.emplace_back(lo, lo + bytes, deleter);
}

void forgetRawRange(const void* base) {
  const auto lo = reinterpret_cast<std::uintptr_t>(base);
  Ranges& r = ranges();
  std::lock_guard<std::mutex> lock(r.mu);
  for (std::size_t i = 0; i < r.spans.size(); ++i)
    if (std::get<0>(r.spans[i]) == lo) {
      r.spans.erase(r.spans.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

void noteRawBlock(void* data, c10::DeleterFnPtr deleter) {
  Shard& s = shardOf(data);
  std::lock_guard<std::mutex> lock(s.mu);
  s.blocks[data] = deleter;
}

void forgetRawBlock(void* data) {
  Shard& s = shardOf(data);
  std::lock_guard<std::mutex> lock(s.mu);
  s.blocks.erase(data);
}

c10::DeleterFnPtr rawBlockDeleter(const void* data) {
  if (c10::DeleterFnPtr d = rangeDeleter(data))
    return d;
  Shard& s = shardOf(data);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.blocks.find(data);
  return it == s.blocks.end() ? nullptr : it->second;
}

void rawFree(void* data) {
  if (!data)
    return;
  if (c10::DeleterFnPtr deleter = rawBlockDeleter(data))
    deleter(data);
  else
    c10::GetDefaultCPUAllocator()->raw_deleter()(data);
}

} // namespace xalloc::runtime::detail
