// The retry stage and its configuration: on a failed allocation, the ladder of search again,
// release callbacks, empty the cache, synchronize, ask peer processes, back off until a
// deadline, and only then OutOfMemory with the stats.
#pragma once

#include "xalloc/runtime/stats.h"
#include "xalloc/runtime/upstream.h"
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace xalloc::runtime {

class Ledger;

struct RetryConfig {
  bool search_again = true;      // step 1: try the upstream once more
  bool release_callbacks = true; // step 2: registered callbacks free what they can
  bool empty_cache = true;       // step 3: the upstream gives its cache back
  bool synchronize = true;       // step 4: wait for pending work, search again
  bool ask_peers = true;         // ask other processes (through the ledger) to release cache
  bool backoff = true;           // step 5: wait and retry until the deadline
  int max_attempts = 50;         // backoff retries at most
  double backoff_ms = 1.0;       // first wait
  double backoff_max_ms = 50;    // waits double up to this
  double jitter = 0.25;          // each wait is scaled by 1 +- jitter (uniform)
  double deadline_ms = 2000;     // give up this long after the first failure

  /// Reads XALLOC_MAX_RETRIES, XALLOC_BACKOFF_MS, XALLOC_BACKOFF_MAX_MS, XALLOC_JITTER,
  /// XALLOC_DEADLINE_MS and XALLOC_STEPS (a comma list of search, callbacks, empty_cache,
  /// synchronize, peers, backoff; "none" for none). Throws std::invalid_argument naming a bad one.
  static RetryConfig fromEnvironment();
};

/// An allocation that failed after every step of the ladder. what() carries the stats.
class OutOfMemory : public std::runtime_error {
public:
  OutOfMemory(std::size_t bytes, const std::string& message)
      : std::runtime_error(message), bytes_(bytes) {}
  std::size_t requestedBytes() const { return bytes_; }

private:
  std::size_t bytes_;
};

/// The retry ladder. Throws OutOfMemory when every enabled step has failed.
class RetryStage : public Upstream {
public:
  using ReleaseCallback = std::function<std::size_t(std::size_t wanted)>;

  RetryStage(std::shared_ptr<Upstream> up, RetryConfig config, std::shared_ptr<Stats> stats,
             std::shared_ptr<Ledger> ledger = nullptr);
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  std::size_t emptyCache() override { return up_->emptyCache(); }
  void synchronize() override { up_->synchronize(); }
  std::string name() const override { return "retry(" + up_->name() + ")"; }

  /// Callbacks run (in registration order) when an allocation fails; each returns the bytes it
  /// freed. Returns an id for removeReleaseCallback.
  int addReleaseCallback(ReleaseCallback cb);
  /// The same under an id the caller chose (install.cpp: one id for a callback in every stack).
  void addReleaseCallback(int id, ReleaseCallback cb);
  void removeReleaseCallback(int id);
  const RetryConfig& config() const { return config_; }

private:
  void* slowPath(std::size_t bytes);
  std::shared_ptr<Upstream> up_;
  RetryConfig config_;
  std::shared_ptr<Stats> stats_;
  std::shared_ptr<Ledger> ledger_;
  std::mutex cb_mu_;
  std::vector<std::pair<int, ReleaseCallback>> callbacks_;
  int next_cb_ = 0;
  // A free anywhere in this stack wakes allocations that are waiting out a backoff.
  // The fast path only reads waiters_ (rarely written); a free bumps the epoch only while
  // someone waits.
  std::mutex wait_mu_;
  std::condition_variable freed_;
  alignas(64) std::atomic<std::uint64_t> free_epoch_{0};
  alignas(64) std::atomic<int> waiters_{0};
};

} // namespace xalloc::runtime
