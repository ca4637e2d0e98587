// The interface every allocator stage and backend implements: allocate, deallocate, give the
// cache back, wait for pending frees. A stage or backend returns nullptr when it cannot
// allocate; only the top of a stack throws (OutOfMemory, carrying the stats).
#pragma once

#include <cstddef>
#include <string>

namespace xalloc::runtime {

class Upstream {
public:
  virtual ~Upstream() = default;
  /// Memory for `bytes` bytes, or nullptr when there is none.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Returns memory from allocate(p's bytes).
  virtual void deallocate(void* p, std::size_t bytes) = 0;
  /// Gives cached, unused memory back to the level below; returns the bytes released.
  virtual std::size_t emptyCache() { return 0; }
  /// Waits for pending work that still holds memory (device streams, deferred frees).
  virtual void synchronize() {}
  virtual std::string name() const = 0;
};

} // namespace xalloc::runtime
