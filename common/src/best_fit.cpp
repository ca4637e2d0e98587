// BestFitAllocator: best fit with coalescing in O(log n).
#include "xalloc/best_fit.h"

#include <algorithm>
#include <map>

#include "xalloc/error.h"

namespace xalloc {

std::int64_t alignUp(std::int64_t value, std::int64_t alignment) {
  if (alignment <= 1)
    return value;
  if ((alignment & (alignment - 1)) == 0) // a power of two: no division
    return (value + alignment - 1) & ~(alignment - 1);
  const std::int64_t rem = value % alignment;
  return rem == 0 ? value : value + (alignment - rem);
}

BestFitAllocator::BestFitAllocator(std::int64_t alignment) : alignment_(alignment) {
  XALLOC_EXPECTS(alignment >= 1, "alignment must be positive");
}

std::int64_t BestFitAllocator::roundSize(std::int64_t size) const {
  XALLOC_EXPECTS(size >= 0, "negative size");
  return alignUp(std::max<std::int64_t>(size, 1), alignment_);
}

void BestFitAllocator::insertFree(std::int64_t start, std::int64_t size) {
  by_size_.emplace(size, start);
  by_start_[start] = size;
  by_end_[start + size] = start;
}

void BestFitAllocator::eraseFree(std::int64_t start, std::int64_t size) {
  by_size_.erase({size, start});
  by_start_.erase(start);
  by_end_.erase(start + size);
}

std::int64_t BestFitAllocator::alloc(std::int64_t size, std::int64_t alignment) {
  const std::int64_t need = roundSize(size);
  const std::int64_t align = alignment == 0 ? alignment_ : alignment;
  XALLOC_EXPECTS(align % alignment_ == 0, "alignment must be a multiple of the allocator's");
  // Smallest free block that holds `need` bytes at an aligned offset (lowest start on ties).
  for (auto it = by_size_.lower_bound({need, INT64_MIN}); it != by_size_.end(); ++it) {
    const auto [bsize, bstart] = *it;
    const std::int64_t offset = alignUp(bstart, align);
    if (offset + need > bstart + bsize)
      continue; // alignment padding does not fit; try the next larger block
    eraseFree(bstart, bsize);
    if (offset > bstart)
      insertFree(bstart, offset - bstart);
    if (offset + need < bstart + bsize)
      insertFree(offset + need, bstart + bsize - offset - need);
    live_[offset] = need;
    used_ += need;
    peak_ = std::max(peak_, used_);
    return offset;
  }
  // Nothing fits: grow at the end, starting inside a free tail block if there is one.
  std::int64_t offset = alignUp(end_, align);
  auto tail = by_end_.find(end_);
  if (tail != by_end_.end()) {
    const std::int64_t tstart = tail->second;
    const std::int64_t aligned = alignUp(tstart, align);
    eraseFree(tstart, end_ - tstart);
    if (aligned > tstart)
      insertFree(tstart, aligned - tstart);
    offset = aligned;
  } else if (offset > end_) {
    insertFree(end_, offset - end_); // padding before an aligned block at the end
  }
  end_ = offset + need;
  live_[offset] = need;
  used_ += need;
  peak_ = std::max(peak_, used_);
  return offset;
}

void BestFitAllocator::free(std::int64_t offset, std::int64_t size) {
  const std::int64_t n = roundSize(size);
  auto it = live_.find(offset);
  XALLOC_EXPECTS(it != live_.end(), "free of an offset that is not allocated");
  XALLOC_EXPECTS(it->second == n, "free with a size other than the allocated one");
  live_.erase(it);
  used_ -= n;
  std::int64_t start = offset;
  std::int64_t len = n;
  if (auto prev = by_end_.find(start); prev != by_end_.end()) {
    const std::int64_t pstart = prev->second;
    const std::int64_t plen = start - pstart;
    eraseFree(pstart, plen);
    start = pstart;
    len += plen;
  }
  if (auto next = by_start_.find(start + len); next != by_start_.end()) {
    const std::int64_t nlen = next->second;
    eraseFree(start + len, nlen);
    len += nlen;
  }
  insertFree(start, len);
}

bool BestFitAllocator::reserve(std::int64_t offset, std::int64_t size) {
  const std::int64_t n = roundSize(size);
  XALLOC_EXPECTS(offset >= 0 && offset % alignment_ == 0, "reserve at an unaligned offset");
  if (offset >= end_) {
    // Beyond the end: the gap up to it becomes (or extends) a free block.
    if (offset > end_) {
      std::int64_t gap_start = end_;
      if (auto tail = by_end_.find(end_); tail != by_end_.end()) {
        gap_start = tail->second;
        eraseFree(gap_start, end_ - gap_start);
      }
      insertFree(gap_start, offset - gap_start);
    }
    end_ = offset + n;
  } else {
    // Inside: the range must lie in one free block (blocks never touch, so one suffices).
    // A linear search: reservations (pinned tensors) are rare.
    std::int64_t bstart = -1, bsize = 0;
    for (const auto& [s, len] : by_start_)
      if (s <= offset && offset < s + len) {
        bstart = s;
        bsize = len;
        break;
      }
    if (bstart < 0)
      return false;
    const std::int64_t bend = bstart + bsize;
    if (offset + n > bend) {
      if (bend != end_)
        return false;
      end_ = offset + n; // the block is the tail: grow the workspace
    }
    eraseFree(bstart, bsize);
    if (offset > bstart)
      insertFree(bstart, offset - bstart);
    if (offset + n < bend)
      insertFree(offset + n, bend - offset - n);
  }
  live_[offset] = n;
  used_ += n;
  peak_ = std::max(peak_, used_);
  return true;
}

std::string BestFitAllocator::checkInvariants() const {
  std::map<std::int64_t, std::int64_t> free_sorted(by_start_.begin(), by_start_.end());
  if (by_size_.size() != by_start_.size() || by_end_.size() != by_start_.size())
    return "free-block maps disagree in size";
  std::int64_t free_bytes = 0;
  std::int64_t prev_end = -1;
  for (const auto& [start, len] : free_sorted) {
    if (len <= 0)
      return "empty free block at " + std::to_string(start);
    if (!by_size_.count({len, start}))
      return "free block at " + std::to_string(start) + " missing from the size index";
    auto e = by_end_.find(start + len);
    if (e == by_end_.end() || e->second != start)
      return "free block at " + std::to_string(start) + " missing from the end index";
    if (start < prev_end)
      return "free blocks overlap at " + std::to_string(start);
    if (start == prev_end)
      return "adjacent free blocks at " + std::to_string(start) + " were not merged";
    prev_end = start + len;
    free_bytes += len;
  }
  if (prev_end > end_)
    return "a free block extends past the workspace";
  std::map<std::int64_t, std::int64_t> live_sorted(live_.begin(), live_.end());
  std::int64_t live_bytes = 0;
  prev_end = 0;
  for (const auto& [start, len] : live_sorted) {
    if (start < prev_end)
      return "live blocks overlap at " + std::to_string(start);
    auto f = free_sorted.upper_bound(start);
    if (f != free_sorted.begin() && std::prev(f)->first + std::prev(f)->second > start)
      return "live block at " + std::to_string(start) + " overlaps a free block";
    if (f != free_sorted.end() && f->first < start + len)
      return "live block at " + std::to_string(start) + " overlaps a free block";
    prev_end = start + len;
    live_bytes += len;
  }
  if (live_bytes != used_)
    return "used() disagrees with the live blocks";
  if (live_bytes + free_bytes != end_)
    return "used + free = " + std::to_string(live_bytes + free_bytes) + " != workspace " +
           std::to_string(end_);
  return "";
}

} // namespace xalloc
