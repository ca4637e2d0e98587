// Best-fit free-block allocator over one linear workspace: offset arithmetic only, no memory.
// Free blocks live in a size-ordered set (best fit in O(log n)) and in hash maps keyed by start
// and end address (neighbours in O(1)), so alloc and free are O(log n) and a free merges with both
// neighbours. When no block fits, the workspace grows at its end, extending a free tail block
// rather than leaving a hole. Used by the static planner (replay) and by the runtime's activation
// arena (runtime/alloc/activation_cache.cpp), which places real blocks at its offsets.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace xalloc {

/// Rounds `value` up to a multiple of `alignment` (a power of two or any positive number).
std::int64_t alignUp(std::int64_t value, std::int64_t alignment);

class BestFitAllocator {
public:
  /// `alignment`: every offset is a multiple of it and every size is rounded up to it.
  explicit BestFitAllocator(std::int64_t alignment = 64);

  /// Returns the offset of a new block of at least `size` bytes (size 0 gives a 1-unit block).
  /// `alignment` (0 = the allocator's) must be a multiple of the allocator's alignment.
  std::int64_t alloc(std::int64_t size, std::int64_t alignment = 0);
  /// Frees the block at `offset` (the size must be the one it was allocated with).
  void free(std::int64_t offset, std::int64_t size);
  /// Claims [offset, offset + size) if it is free (or beyond the end); false if it is taken.
  /// O(free blocks): meant for the few pinned tensors of a plan.
  bool reserve(std::int64_t offset, std::int64_t size);

  std::int64_t used() const { return used_; }             // bytes in live blocks
  std::int64_t peak() const { return peak_; }             // most bytes ever live at once
  std::int64_t workspace() const { return end_; }         // bytes the workspace spans
  std::int64_t freeBytes() const { return end_ - used_; } // bytes in free blocks
  std::size_t freeBlocks() const { return by_size_.size(); }
  std::int64_t alignment() const { return alignment_; }
  /// Calls f(offset, size) for every free block, in no particular order.
  template <class F> void forEachFreeBlock(F&& f) const {
    for (const auto& [start, size] : by_start_)
      f(start, size);
  }

  /// Checks the invariants (free blocks never overlap or touch, used + free = workspace, the maps
  /// agree); returns "" or what is wrong. O(n log n): for tests and debug builds.
  std::string checkInvariants() const;

private:
  void insertFree(std::int64_t start, std::int64_t size);
  void eraseFree(std::int64_t start, std::int64_t size);
  std::int64_t roundSize(std::int64_t size) const;

  std::int64_t alignment_;
  std::set<std::pair<std::int64_t, std::int64_t>> by_size_; // (size, start)
  std::unordered_map<std::int64_t, std::int64_t> by_start_; // start -> size
  std::unordered_map<std::int64_t, std::int64_t> by_end_;   // end -> start
  std::unordered_map<std::int64_t, std::int64_t> live_;     // start -> size of live blocks
  std::int64_t used_ = 0;
  std::int64_t peak_ = 0;
  std::int64_t end_ = 0;
};

} // namespace xalloc
