// A bounded, thread-safe least-recently-used map from keys to shared, immutable values: what the
// packed ops keep per input shape (a oneDNN primitive and its packed weight), so that a service
// fed many shapes keeps at most `capacity` of them per op. A value found or inserted stays alive
// for its holder even after it is evicted (shared_ptr), so one thread never loses what another
// evicts under it.
//
// Admission (as TinyLFU admits): when the cache is full, a key is let in only when it has been
// asked for more often lately than the entry it would evict; otherwise the caller computes
// without a cached value (the packed ops: ATen's own op, the original's speed). A rotation over
// more shapes than the capacity then keeps `capacity` of them prepared instead of preparing
// every one on every call (50 shapes over 8: 1.19x slower than the original, every call a
// oneDNN primitive made and dropped). Counts halve every 16x the capacity requests (or sooner
// when more than 32x the capacity keys are counted; those at zero go), so a shape that comes
// back often gets in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace xalloc::runtime {

template <class Key, class Value> class LruCache {
public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// The value for `key` (now the most recently used), or null. Counts the request.
  std::shared_ptr<const Value> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    count(key);
    auto it = index_.find(key);
    if (it == index_.end())
      return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->second;
  }

  /// Whether a value for `key`, not found, should be made and inserted: there is room, or
  /// `key` was asked for more often lately than the least recently used entry. When not, the
  /// caller computes without one (counted in `refused`).
  bool admits(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (order_.size() < capacity_ || index_.count(key))
      return true;
    const auto mine = freq_.find(key);
    const auto theirs = freq_.find(order_.back().first);
    const std::uint32_t a = mine == freq_.end() ? 0 : mine->second;
    const std::uint32_t b = theirs == freq_.end() ? 0 : theirs->second;
    if (a > b)
      return true;
    ++refused_;
    return false;
  }

  /// Inserts `value` for `key` unless another thread did first (then returns theirs), and
  /// evicts the least recently used entries beyond the capacity.
  std::shared_ptr<const Value> insert(const Key& key, std::shared_ptr<const Value> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    ++misses_;
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    return order_.front().second;
  }

  /// Calls f(const Value&) for each cached value, most recent first, under the lock.
  template <class F> void forEach(F&& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : order_)
      f(*e.second);
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  std::size_t capacity() const { return capacity_; }
  std::int64_t evictions() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return evictions_;
  }
  std::int64_t misses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return misses_;
  }
  std::int64_t refused() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return refused_;
  }

private:
  // One request for `key` counted; every 16x capacity requests, or sooner when more than 32x
  // capacity keys are counted, all counts halve, and those at 0 not cached go.
  void count(const Key& key) {
    ++freq_[key];
    if (++requests_ < 16 * capacity_ && freq_.size() <= 32 * capacity_)
      return;
    requests_ = 0;
    for (auto it = freq_.begin(); it != freq_.end();) {
      it->second /= 2;
      it = it->second == 0 && !index_.count(it->first) ? freq_.erase(it) : std::next(it);
    }
  }

  using Entry = std::pair<Key, std::shared_ptr<const Value>>;
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::list<Entry> order_;
  std::map<Key, typename std::list<Entry>::iterator> index_;
  std::map<Key, std::uint32_t> freq_;
  std::size_t requests_ = 0;
  std::int64_t hits_ = 0, misses_ = 0, evictions_ = 0, refused_ = 0;
};

} // namespace xalloc::runtime
