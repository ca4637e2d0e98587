// The peer ledger: a per-device registry in POSIX shared memory where cooperating processes
// publish what they use and cache, reserve against a shared capacity (simulated devices), and
// ask each other to release cached memory. A process-shared robust mutex guards it; a process
// that dies holding it, or holding memory, is reclaimed by the next process that takes the lock
// (a dead pid's slot is emptied).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace xalloc::runtime {

struct LedgerPeer {
  std::int32_t pid = 0;
  std::int64_t used = 0;   // bytes in use (reserved against the capacity)
  std::int64_t cached = 0; // of which cached and releasable on request
};

class Ledger {
public:
  static constexpr int kSlots = 64;

  /// Opens (creating when needed) the ledger `name` (a POSIX shm name such as
  /// "/xalloc-cpu0"); `capacity` is used by whoever creates it (0: no shared capacity).
  /// Takes a slot for this process. Throws std::runtime_error on failure.
  static std::shared_ptr<Ledger> open(const std::string& name, std::int64_t capacity);
  /// Removes the shared-memory object (processes that have it open keep their mapping).
  static void unlink(const std::string& name);
  ~Ledger();

  /// Reserves `bytes` of the shared capacity for this process; false when it does not fit.
  bool reserve(std::int64_t bytes);
  void unreserve(std::int64_t bytes);
  /// Publishes how many of this process's reserved bytes are cached (releasable).
  void setCached(std::int64_t bytes);
  /// Asks every peer that caches memory to release it; returns the bytes they cache.
  std::int64_t requestRelease(std::int64_t bytes);
  /// Counts releases and reclamations by anyone: a waiter retries when it changes.
  std::uint64_t releaseEpoch() const;
  /// Runs `release` (returns bytes freed) on a background thread whenever a peer asks.
  void startResponder(std::function<std::int64_t()> release);
  void stopResponder();

  std::int64_t capacity() const;
  std::vector<LedgerPeer> peers(); // reclaims dead ones first
  const std::string& name() const { return name_; }

private:
  struct Shared;
  Ledger(std::string name, Shared* shared, int slot);
  void lock();
  void unlock();
  // Holds the process-shared mutex for a scope, whatever leaves it (taking the mutex from a
  // dead owner reclaims that process's slots first).
  class Guard {
  public:
    explicit Guard(Ledger& ledger) : ledger_(ledger) { ledger_.lock(); }
    ~Guard() { ledger_.unlock(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

  private:
    Ledger& ledger_;
  };
  void reclaimDeadLocked();
  std::string name_;
  Shared* shared_;
  int slot_;
  std::atomic<bool> responder_stop_{false};
  std::thread responder_;
};

} // namespace xalloc::runtime
