// The graceful allocator as libtorch's CPU allocator: install() puts a stack (stats, log,
// retry ladder) over libtorch's own CPU allocation in front of every CPU tensor, uninstall()
// puts the previous allocator back. Part of libxalloc_runtime.so.
//
//   xalloc::runtime::install();            // C++: one line, configured by XALLOC_* variables
//   { xalloc::runtime::Guard g; ... }      // or for a scope
//
// Tensors allocated while installed may outlive uninstall(): their memory goes back through
// the stack that allocated it, which lives until the process ends. oneDNN tensors are freed
// through whatever allocator is installed at the time (libtorch's raw interface), so where
// libtorch's own allocator was there before, uninstall() puts the runtime's pass-through
// allocator in its place: libtorch's allocation for every request, and frees that find the
// right owner (src/raw_blocks.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "xalloc/runtime/allocator.h"
#include "xalloc/runtime/ledger.h"

namespace xalloc::runtime {

struct InstallOptions {
  RetryConfig retry;
  bool log = false;             // XALLOC_LOG=1
  std::string log_path;         // XALLOC_LOG_FILE (default: stderr)
  std::string ledger;           // XALLOC_LEDGER: a shm name such as /xalloc-cpu (default: none)
  std::int64_t limit_bytes = 0; // XALLOC_CPU_LIMIT: cap on CPU bytes (0: none), e.g. 4G;
                                // XALLOC_CPU_LIMIT=0, a cap that refuses everything, is an error
  /// Reads every XALLOC_* variable; throws std::invalid_argument naming a bad one.
  static InstallOptions fromEnvironment();
};

/// Installs the stack as the CPU allocator. Installing again replaces the stack.
/// Installs are a stack: an install() inside another (a nested Guard, a nested
/// xalloc.graceful block) is undone by the next uninstall(), which puts the outer one back.
void install(const InstallOptions& options = InstallOptions::fromEnvironment());
/// Undoes the most recent install(): the one before it is in place again, or, after the
/// outermost, the allocator that was there before (libtorch's: through the pass-through
/// allocator above). No-op when not installed.
void uninstall();
bool installed();

/// The installed stack's counters (see Stats::snapshot); empty when never installed.
std::map<std::string, double> stats();
void resetStats();

/// A release callback for the retry ladder (see RetryStage): called by every stack installed,
/// whether it was installed before or after the callback was added. Returns an id.
int addReleaseCallback(RetryStage::ReleaseCallback cb);
void removeReleaseCallback(int id);

/// libtorch's CPU allocation (c10::alloc_cpu, 64-byte aligned) as a stack's backend, with an
/// optional cap in bytes and an optional ledger to reserve against.
std::shared_ptr<Upstream> makeCpuBackend(std::int64_t limit_bytes,
                                         std::shared_ptr<Ledger> ledger = nullptr);

#ifdef XALLOC_WITH_CUDA
/// The CUDA caching allocator of `device` as a stack's backend (libtorch with CUDA only):
/// `makeStack(makeCudaCachingBackend(0), RetryConfig::fromEnvironment())`.
std::shared_ptr<Upstream> makeCudaCachingBackend(int device);
#endif

/// install() for a scope.
class Guard {
public:
  explicit Guard(const InstallOptions& options = InstallOptions::fromEnvironment()) {
    install(options);
  }
  ~Guard() { uninstall(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

} // namespace xalloc::runtime
