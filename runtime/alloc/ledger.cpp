// Ledger: POSIX shared memory, a robust process-shared mutex, one slot per process.
#include "xalloc/runtime/ledger.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace xalloc::runtime {

namespace {
constexpr std::uint32_t kMagic = 0x58414c4c; // "XALL"
constexpr std::uint32_t kVersion = 1;

// A process is alive when it exists and is not a zombie (killed, not yet reaped by its parent).
bool alive(std::int32_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
    return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* f = std::fopen(path, "r");
  if (!f)
    return true; // no /proc: trust kill(2)
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* close_paren = std::strrchr(buf, ')'); // "pid (comm) S ..."
  return !(n > 0 && close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
}
} // namespace

struct Ledger::Shared {
  std::atomic<std::uint32_t> magic;
  std::uint32_t version;
  pthread_mutex_t mutex;
  std::int64_t capacity;
  std::atomic<std::uint64_t> release_epoch;
  struct Slot {
    std::atomic<std::int32_t> pid;
    std::atomic<std::int64_t> used;
    std::atomic<std::int64_t> cached;
    std::atomic<std::int64_t> release_request;
  } slots[kSlots];
};

static_assert(std::atomic<std::int64_t>::is_always_lock_free, "shared atomics must be lock-free");

std::shared_ptr<Ledger> Ledger::open(const std::string& name, std::int64_t capacity) {
  bool created = true;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  }
  if (fd < 0)
    throw std::runtime_error("ledger " + name + ": shm_open: " + std::strerror(errno));
  if (created && ::ftruncate(fd, sizeof(Shared)) != 0) {
    ::close(fd);
    throw std::runtime_error("ledger " + name + ": ftruncate: " + std::strerror(errno));
  }
  // Another process may still be sizing it: wait until it has the full size.
  for (int i = 0; !created; ++i) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Shared)))
      break;
    if (i > 1000) {
      ::close(fd);
      throw std::runtime_error("ledger " + name + ": never initialised by its creator");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED)
    throw std::runtime_error("ledger " + name + ": mmap: " + std::strerror(errno));
  auto* s = static_cast<Shared*>(mem);
  if (created) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    s->version = kVersion;
    s->capacity = capacity;
    s->release_epoch.store(0);
    for (auto& slot : s->slots) {
      slot.pid.store(0);
      slot.used.store(0);
      slot.cached.store(0);
      slot.release_request.store(0);
    }
    s->magic.store(kMagic, std::memory_order_release);
  } else {
    for (int i = 0; s->magic.load(std::memory_order_acquire) != kMagic; ++i) {
      if (i > 1000) {
        ::munmap(mem, sizeof(Shared));
        throw std::runtime_error("ledger " + name + ": not an x-allocator ledger");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (s->version != kVersion) {
      ::munmap(mem, sizeof(Shared));
      throw std::runtime_error("ledger " + name + ": version " + std::to_string(s->version) +
                               ", expected " + std::to_string(kVersion));
    }
  }
  std::shared_ptr<Ledger> ledger(new Ledger(name, s, -1));
  {
    Guard g(*ledger);
    ledger->reclaimDeadLocked();
    const std::int32_t me = static_cast<std::int32_t>(::getpid());
    for (int i = 0; i < kSlots; ++i)
      if (s->slots[i].pid.load() == 0) {
        s->slots[i].pid.store(me);
        s->slots[i].used.store(0);
        s->slots[i].cached.store(0);
        s->slots[i].release_request.store(0);
        ledger->slot_ = i;
        break;
      }
  }
  if (ledger->slot_ < 0)
    throw std::runtime_error("ledger " + name + ": all " + std::to_string(kSlots) +
                             " slots are taken by live processes");
  return ledger;
}

void Ledger::unlink(const std::string& name) {
  ::shm_unlink(name.c_str());
}

Ledger::Ledger(std::string name, Shared* shared, int slot)
    : name_(std::move(name)), shared_(shared), slot_(slot) {}

Ledger::~Ledger() {
  stopResponder();
  if (slot_ >= 0) {
    Guard g(*this);
    auto& slot = shared_->slots[slot_];
    slot.used.store(0);
    slot.cached.store(0);
    slot.release_request.store(0);
    slot.pid.store(0);
    shared_->release_epoch.fetch_add(1);
  }
  ::munmap(shared_, sizeof(Shared));
}

void Ledger::lock() {
  const int rc = pthread_mutex_lock(&shared_->mutex);
  if (rc == EOWNERDEAD) {
    // Its owner died inside the critical section; the slots are still consistent (every field
    // is one atomic store), so mark the mutex usable and reclaim the dead process.
    pthread_mutex_consistent(&shared_->mutex);
    reclaimDeadLocked();
  } else if (rc != 0) {
    throw std::runtime_error("ledger " + name_ + ": lock: " + std::strerror(rc));
  }
}

void Ledger::unlock() {
  pthread_mutex_unlock(&shared_->mutex);
}

void Ledger::reclaimDeadLocked() {
  for (auto& slot : shared_->slots) {
    const std::int32_t pid = slot.pid.load();
    if (pid != 0 && !alive(pid)) {
      slot.used.store(0);
      slot.cached.store(0);
      slot.release_request.store(0);
      slot.pid.store(0);
      shared_->release_epoch.fetch_add(1);
    }
  }
}

bool Ledger::reserve(std::int64_t bytes) {
  Guard g(*this);
  std::int64_t total = 0;
  auto sum = [&] {
    total = 0;
    for (auto& slot : shared_->slots)
      total += slot.used.load();
  };
  sum();
  if (shared_->capacity > 0 && total + bytes > shared_->capacity) {
    reclaimDeadLocked(); // a dead process's memory may be what is missing
    sum();
  }
  const bool ok = shared_->capacity <= 0 || total + bytes <= shared_->capacity;
  if (ok)
    shared_->slots[slot_].used.fetch_add(bytes);
  return ok;
}

void Ledger::unreserve(std::int64_t bytes) {
  shared_->slots[slot_].used.fetch_sub(bytes);
  shared_->release_epoch.fetch_add(1);
}

void Ledger::setCached(std::int64_t bytes) {
  shared_->slots[slot_].cached.store(bytes);
}

std::int64_t Ledger::requestRelease(std::int64_t bytes) {
  std::int64_t cached = 0;
  for (int i = 0; i < kSlots; ++i) {
    auto& slot = shared_->slots[i];
    if (i == slot_ || slot.pid.load() == 0 || slot.cached.load() <= 0)
      continue;
    cached += slot.cached.load();
    slot.release_request.store(bytes);
  }
  return cached;
}

std::uint64_t Ledger::releaseEpoch() const {
  return shared_->release_epoch.load();
}

void Ledger::startResponder(std::function<std::int64_t()> release) {
  stopResponder();
  responder_stop_ = false;
  responder_ = std::thread([this, release = std::move(release)] {
    while (!responder_stop_.load()) {
      auto& slot = shared_->slots[slot_];
      if (slot.release_request.exchange(0) > 0) {
        release();
        shared_->release_epoch.fetch_add(1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
}

void Ledger::stopResponder() {
  responder_stop_ = true;
  if (responder_.joinable())
    responder_.join();
}

std::int64_t Ledger::capacity() const {
  return shared_->capacity;
}

std::vector<LedgerPeer> Ledger::peers() {
  Guard g(*this);
  reclaimDeadLocked();
  std::vector<LedgerPeer> out;
  for (auto& slot : shared_->slots)
    if (slot.pid.load() != 0)
      out.push_back({slot.pid.load(), slot.used.load(), slot.cached.load()});
  return out;
}

} // namespace xalloc::runtime
