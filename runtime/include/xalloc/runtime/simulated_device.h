// A fixed-capacity simulated device for tests and benchmarks: real host memory, a capacity
// (shared across processes through a ledger), and frees that complete on synchronize().
#pragma once

#include "xalloc/runtime/upstream.h"
#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xalloc::runtime {

class Ledger;

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

} // namespace xalloc::runtime
