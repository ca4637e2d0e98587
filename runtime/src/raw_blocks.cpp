// The registry of raw_blocks.h: shards by address, each a mutex and a map, so threads that
// allocate at once rarely wait on each other.
#include "raw_blocks.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>

namespace xalloc::runtime::detail {

namespace {

struct Shard {
  std::mutex mu;
  std::unordered_map<const void*, c10::DeleterFnPtr> blocks;
};

constexpr std::size_t kShards = 64;

// Never destroyed: blocks may be freed while static destructors run.
std::array<Shard, kShards>& shards() {
  static auto* s = new std::array<Shard, kShards>;
  return *s;
}

Shard& shardOf(const void* p) {
  // Blocks are 64-byte aligned; the bits above the alignment spread them.
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return shards()[((a >> 6) ^ (a >> 12) ^ (a >> 20)) % kShards];
}

} // namespace

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
