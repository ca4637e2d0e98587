// A bounded, thread-safe least-recently-used map from keys to shared, immutable values: what the
// packed ops keep per input shape (a oneDNN primitive and its packed weight), so that a service
// fed many shapes keeps at most `capacity` of them per op. A value found or inserted stays alive
// for its holder even after it is evicted (shared_ptr), so one thread never loses what another
// evicts under it.
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

  /// The value for `key` (now the most recently used), or null.
  std::shared_ptr<const Value> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end())
      return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->second;
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

private:
  using Entry = std::pair<Key, std::shared_ptr<const Value>>;
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::list<Entry> order_;
  std::map<Key, typename std::list<Entry>::iterator> index_;
  std::int64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

} // namespace xalloc::runtime
