// Activations of rewritten models from memory kept for reuse, not given back to the OS between
// calls (see src/activation_cache.cpp).
//
// A rewritten fast-form model starts with xalloc::activations_enter() and ends with
// xalloc::activations_exit(). Between the two, every CPU tensor of at least
// kCachedActivationBytes that the calling thread allocates (the runtime's ops' outputs and
// ATen's alike) is placed in the process's activation arena: one reserved range of address
// space whose blocks are placed best-fit with coalescing (memplan's BestFitAllocator), so a call
// reuses the memory the previous call wrote, at the same offsets, with the footprint of the
// model's peak of live activations. glibc's malloc, by contrast, hands blocks above its mmap
// threshold back to the OS on free and faults them in again (zeroed, page by page) on the next
// call, and shares its heap with whatever else the process does.
//
// The bound: free arena pages that are still resident hold at most XALLOC_ACTIVATION_CACHE_MB
// MiB (default 256; 0 turns the arena off). Past it, the pages of every free block are given
// back (madvise(MADV_DONTNEED)). Blocks in use are the model's live tensors, as without the
// arena. A request the arena cannot place (its reservation is full) is libtorch's.
//
// To reach ATen's allocations, the arena's allocator is installed as libtorch's CPU allocator on
// the first enter, when libtorch's own allocator is in place (never over the graceful allocator,
// which keeps its budget and ledger for every byte). Outside a scope, and on other threads, it
// passes each request to libtorch's allocator unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

#include <c10/core/Allocator.h>

namespace xalloc::runtime {

/// Requests below this come from libtorch's allocator even inside a scope: glibc keeps small
/// blocks in its own bins.
inline constexpr std::size_t kCachedActivationBytes = std::size_t{64} << 10;

struct ActivationCacheStats {
  std::int64_t hits = 0;       // requests placed in the arena
  std::int64_t misses = 0;     // requests it could not place (libtorch's allocator served them)
  std::int64_t trims = 0;      // times the free pages were given back to stay within the limit
  std::int64_t idle_bytes = 0; // free bytes whose pages may be resident (<= the limit)
  std::int64_t peak_idle_bytes = 0; // the most idle_bytes ever held after a free
  std::int64_t live_bytes = 0;      // bytes of blocks in use
  std::int64_t workspace_bytes = 0; // the arena's span: blocks in use, free blocks and holes
  std::int64_t limit_bytes = 0;
  std::int64_t reserved_bytes = 0; // address space reserved (0: no arena could be mapped)
};

/// An arena of CPU blocks: a reserved range of address space (pages are backed when first
/// written), placed best-fit with coalescing. Thread-safe: a block may be freed on any thread.
class ActivationCache {
public:
  /// `reserve_bytes` of address space (less when the system refuses that much; none at all
  /// leaves every request to libtorch's allocator); free pages beyond `limit_bytes` are given
  /// back.
  ActivationCache(std::size_t limit_bytes, std::size_t reserve_bytes);
  ActivationCache(const ActivationCache&) = delete;
  ActivationCache& operator=(const ActivationCache&) = delete;
  ~ActivationCache(); // unmaps the arena: every block must have been freed before

  /// A block of at least `bytes`, 64-byte aligned: placed in the arena, else libtorch's.
  c10::DataPtr allocate(std::size_t bytes);
  /// Whether `data` lies in the arena.
  bool owns(const void* data) const;
  /// Gives back the pages of every free block; returns the bytes they span.
  std::size_t release();
  ActivationCacheStats stats() const;
  std::size_t limit() const { return limit_; }
  /// The address space reserved; 0: no arena (a limit of 0, or none could be mapped).
  std::size_t reserved() const;

  /// Around fork() (the process's arena registers both with pthread_atfork).
  void lockForFork();
  void unlockAfterFork();

  /// The deleter of every block placed in an arena (data == context).
  static void deleteBlock(void* data);

  // Defined in activation_cache.cpp.
  struct Header;
  struct State;

private:
  void free(Header* h);
  State* state_;
  const std::size_t limit_;
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
/// Gives back the pages of the process's arena's free blocks; returns the bytes they span.
std::size_t releaseActivationCache();

} // namespace xalloc::runtime
