// Activations of rewritten models from memory kept for reuse, not given back to the OS between
// calls (see src/activation_cache.cpp).
//
// A rewritten fast-form model starts with xalloc::activations_enter() and ends with
// xalloc::activations_exit(). Between the two, every CPU tensor of at least
// kCachedActivationBytes that the calling thread allocates (the runtime's ops' outputs and
// ATen's alike) comes from the process's ActivationCache, and goes back to it when freed: the
// next call, which allocates the same shapes, reuses those blocks instead of asking glibc's
// malloc, which hands blocks above its mmap threshold back to the OS on free and faults them in
// again (zeroed, page by page) on the next call.
//
// The bound: the cache holds at most XALLOC_ACTIVATION_CACHE_MB MiB (default 256; 0 turns it
// off) of blocks not in use; past it, the blocks freed longest ago are given back first. Blocks
// in use are the model's live tensors, as without the cache. A block is at most 1/8 larger than
// asked for (eight size classes per power of two).
//
// To reach ATen's allocations, the cache is installed as libtorch's CPU allocator on the first
// enter, when libtorch's own allocator is in place (never over the graceful allocator, which
// keeps its budget and ledger for every byte). Outside a scope, and on other threads, it passes
// each request to libtorch's allocator unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

#include <c10/core/Allocator.h>

namespace xalloc::runtime {

/// Requests below this come from libtorch's allocator even inside a scope: glibc keeps small
/// blocks in its own bins.
inline constexpr std::size_t kCachedActivationBytes = std::size_t{64} << 10;

struct ActivationCacheStats {
  std::int64_t hits = 0;      // requests served by a block kept for reuse
  std::int64_t misses = 0;    // requests that asked the upstream allocator
  std::int64_t evictions = 0; // idle blocks given back to stay within the limit
  std::int64_t idle_bytes = 0;
  std::int64_t peak_idle_bytes = 0;
  std::int64_t limit_bytes = 0;
};

/// A bounded cache of CPU blocks in size classes, over an upstream allocator. Thread-safe: a
/// block may be freed on any thread.
class ActivationCache {
public:
  ActivationCache(std::size_t limit_bytes, c10::Allocator* upstream);
  ActivationCache(const ActivationCache&) = delete;
  ActivationCache& operator=(const ActivationCache&) = delete;
  ~ActivationCache(); // gives back the idle blocks; blocks in use must be freed before

  /// A block of at least `bytes`: one of the size's class kept for reuse, else a new one. Freed,
  /// it is kept for reuse while the idle blocks stay within the limit.
  c10::DataPtr allocate(std::size_t bytes);
  /// Whether `data` is a block of this cache's (in use or idle).
  bool owns(const void* data) const;
  /// Gives back every idle block; returns their bytes.
  std::size_t release();
  ActivationCacheStats stats() const;
  std::size_t limit() const { return limit_; }

  /// The bytes a request of `bytes` is served with (its size class).
  static std::size_t sizeClass(std::size_t bytes);
  /// The deleter of every block this class hands out (data == context).
  static void deleteBlock(void* data);

  struct Header;

private:
  void recycle(Header* h);
  Header* take(std::size_t cls);
  struct State;
  State* state_;
  const std::size_t limit_;
  c10::Allocator* const upstream_;
};

/// Starts the calling thread's activation scope (installs the process's cache on first use);
/// a bad XALLOC_ACTIVATION_CACHE_MB is an error in one line. Idempotent.
void enterActivationScope();
/// Ends it. A scope left open by a call that threw ends at the thread's next exit.
void exitActivationScope();
bool inActivationScope();
/// Whether the process's cache is libtorch's CPU allocator now.
bool activationCacheInstalled();
/// Whether `a` is the process's cache's allocator (which passes through outside scopes).
bool isActivationCacheAllocator(const c10::Allocator* a);
ActivationCacheStats activationCacheStats();
/// Gives back the process's cache's idle blocks; returns their bytes.
std::size_t releaseActivationCache();

} // namespace xalloc::runtime
