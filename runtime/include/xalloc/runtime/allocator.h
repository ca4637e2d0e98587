// The graceful allocator: stages that each do one thing and wrap an upstream, composed into a
// stack (stats -> log -> retry ladder -> backend). Plain C++ with no libtorch: the CPU backend
// that plugs the stack into libtorch lives in install.h.
//
// A stage or backend returns nullptr when it cannot allocate; only the top of a stack throws
// (OutOfMemory, carrying the stats).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

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

/// Counters of one stack, named after PyTorch's `memory_stats` where one exists.
/// The fast path (a successful first try) touches only relaxed atomics.
class Stats {
public:
  void onAlloc(std::size_t bytes);
  void onFree(std::size_t bytes);
  void onOom();
  /// A retry ladder step that made a failed allocation succeed, and how long it took.
  void onRecovered(const std::string& step, double waited_ms);
  void onRetry();

  /// Bytes allocated and not freed (exact).
  std::int64_t current() const;
  /// The most bytes allocated at once (exact to within 64 KiB per allocating thread).
  std::int64_t peak() const;

  /// A snapshot: "allocation.all.allocated", "allocation.all.freed", "allocation.all.current",
  /// "allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
  /// "allocated_bytes.all.freed", "largest_request_bytes", "num_alloc_retries", "num_ooms",
  /// "recovered.<step>", "wait_ms.p50", "wait_ms.p99", "wait_ms.max", "recoveries".
  std::map<std::string, double> snapshot() const;
  /// One line for error messages: "allocated 1.5 GiB (peak 2 GiB) in 12 blocks, ...".
  std::string summary() const;
  void reset();

  Stats();

private:
  // One shard per thread, written only by its thread (plain loads and stores, no locked
  // instructions), summed by snapshot(). Bytes in use also go to one shared counter, in
  // batches of at least kFlushBytes per thread, which is what the peak follows: exact to
  // within kFlushBytes per thread.
  static constexpr std::int64_t kFlushBytes = 64 << 10;
  struct alignas(64) Shard {
    std::atomic<std::int64_t> allocs{0}, frees{0}, bytes_in{0}, bytes_out{0};
    std::int64_t pending = 0; // not yet added to current_
    std::int64_t largest = 0;
  };
  Shard& shard();
  void flush(Shard& s);
  const std::uint64_t id_;
  mutable std::mutex shards_mu_;
  std::vector<std::unique_ptr<Shard>> shards_;
  alignas(64) std::atomic<std::int64_t> current_{0};
  alignas(64) std::atomic<std::int64_t> peak_{0};
  alignas(64) std::atomic<std::int64_t> largest_{0};
  alignas(64) std::atomic<std::int64_t> ooms_{0}, retries_{0};
  mutable std::mutex slow_; // the slow path: recoveries and their waits
  std::map<std::string, std::int64_t> recovered_;
  std::vector<double> waits_ms_;
};

/// Counts every allocation and free of its upstream.
class StatsStage : public Upstream {
public:
  StatsStage(std::shared_ptr<Upstream> up, std::shared_ptr<Stats> stats)
      : up_(std::move(up)), stats_(std::move(stats)) {}
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  std::size_t emptyCache() override { return up_->emptyCache(); }
  void synchronize() override { up_->synchronize(); }
  std::string name() const override { return "stats(" + up_->name() + ")"; }

private:
  std::shared_ptr<Upstream> up_;
  std::shared_ptr<Stats> stats_;
};

/// Writes each allocation event as one JSON line (`XALLOC_LOG=1`; to `XALLOC_LOG_FILE` or stderr).
class LogStage : public Upstream {
public:
  /// `path` empty: stderr.
  LogStage(std::shared_ptr<Upstream> up, const std::string& path);
  ~LogStage() override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  std::size_t emptyCache() override;
  void synchronize() override { up_->synchronize(); }
  std::string name() const override { return "log(" + up_->name() + ")"; }

private:
  void write(const std::string& line);
  std::shared_ptr<Upstream> up_;
  std::FILE* out_ = nullptr;
  bool owned_ = false;
  std::mutex mu_;
};

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

/// A fixed-capacity device for tests: real host memory, but at most `capacity` bytes in use.
/// With a ledger, the capacity is shared by every process attached to the ledger's device.
/// `deferFrees(true)` holds freed blocks as pending until synchronize(), like a device whose
/// frees complete when its stream reaches them.
class SimulatedDevice : public Upstream {
public:
  explicit SimulatedDevice(std::size_t capacity, std::shared_ptr<Ledger> ledger = nullptr);
  ~SimulatedDevice() override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  std::size_t emptyCache() override;
  void synchronize() override;
  std::string name() const override { return "simulated"; }

  void deferFrees(bool on) { defer_ = on; }
  /// Keep freed blocks in a cache (reused for the same size) until emptyCache().
  void cacheFrees(bool on) { cache_ = on; }
  std::size_t used() const;
  std::size_t cached() const;

private:
  bool reserve(std::size_t bytes);
  void unreserve(std::size_t bytes);
  std::size_t capacity_;
  std::shared_ptr<Ledger> ledger_;
  std::atomic<bool> defer_{false}, cache_{false};
  mutable std::mutex mu_;
  std::size_t used_ = 0; // bytes reserved against the capacity (live, pending and cached)
  std::vector<std::pair<void*, std::size_t>> pending_, cached_;
};

/// A stack as the environment configures it: stats, then a log when XALLOC_LOG=1, then the
/// retry ladder, over `backend`.
struct Stack {
  std::shared_ptr<Stats> stats;
  std::shared_ptr<RetryStage> retry;
  std::shared_ptr<Upstream> top;
};
Stack makeStack(std::shared_ptr<Upstream> backend, const RetryConfig& config,
                std::shared_ptr<Ledger> ledger = nullptr, bool log = false,
                const std::string& log_path = "");

} // namespace xalloc::runtime
