// The statistics stage: counters of one stack, named after PyTorch's `memory_stats`, and the
// stage that counts every allocation and free of its upstream.
#pragma once

#include "xalloc/runtime/upstream.h"
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xalloc::runtime {

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

} // namespace xalloc::runtime
