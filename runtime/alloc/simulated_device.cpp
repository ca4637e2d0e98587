// SimulatedDevice: a fixed-capacity device over host memory for tests.
#include "xalloc/runtime/simulated_device.h"

#include "xalloc/runtime/ledger.h"
#include <cstdlib>
#include <cstring>

namespace xalloc::runtime {

SimulatedDevice::SimulatedDevice(std::size_t capacity, std::shared_ptr<Ledger> ledger)
    : capacity_(capacity), ledger_(std::move(ledger)) {}

SimulatedDevice::~SimulatedDevice() {
  synchronize();
  emptyCache();
}

bool SimulatedDevice::reserve(std::size_t bytes) {
  if (ledger_)
    return ledger_->reserve(static_cast<std::int64_t>(bytes));
  if (used_ + bytes > capacity_)
    return false;
  return true;
}

void SimulatedDevice::unreserve(std::size_t bytes) {
  if (ledger_)
    ledger_->unreserve(static_cast<std::int64_t>(bytes));
}

void* SimulatedDevice::allocate(std::size_t bytes) {
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> g(mu_);
  if (cache_) // a cached block of the same size is reused as it is
    for (auto it = cached_.begin(); it != cached_.end(); ++it)
      if (it->second == n) {
        void* p = it->first;
        cached_.erase(it);
        if (ledger_) {
          std::size_t c = 0;
          for (auto& b : cached_)
            c += b.second;
          ledger_->setCached(static_cast<std::int64_t>(c));
        }
        return p;
      }
  if (!reserve(n))
    return nullptr;
  void* p = std::malloc(n);
  if (!p) {
    unreserve(n);
    return nullptr;
  }
  used_ += n;
  return p;
}

void SimulatedDevice::deallocate(void* p, std::size_t bytes) {
  if (!p)
    return;
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> g(mu_);
  if (defer_) {
    pending_.emplace_back(p, n);
    return;
  }
  if (cache_) {
    cached_.emplace_back(p, n);
    if (ledger_) {
      std::size_t c = 0;
      for (auto& b : cached_)
        c += b.second;
      ledger_->setCached(static_cast<std::int64_t>(c));
    }
    return;
  }
  std::free(p);
  used_ -= n;
  unreserve(n);
}

void SimulatedDevice::synchronize() {
  std::vector<std::pair<void*, std::size_t>> done;
  {
    std::lock_guard<std::mutex> g(mu_);
    done.swap(pending_);
  }
  for (auto& [p, n] : done) {
    std::lock_guard<std::mutex> g(mu_);
    if (cache_) {
      cached_.emplace_back(p, n);
      continue;
    }
    std::free(p);
    used_ -= n;
    unreserve(n);
  }
}

std::size_t SimulatedDevice::emptyCache() {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t freed = 0;
  for (auto& [p, n] : cached_) {
    std::free(p);
    used_ -= n;
    unreserve(n);
    freed += n;
  }
  cached_.clear();
  if (ledger_)
    ledger_->setCached(0);
  return freed;
}

std::size_t SimulatedDevice::used() const {
  std::lock_guard<std::mutex> g(mu_);
  return used_;
}

std::size_t SimulatedDevice::cached() const {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t c = 0;
  for (auto& b : cached_)
    c += b.second;
  return c;
}

} // namespace xalloc::runtime
