// install(): the graceful stack behind libtorch's CPU allocator.
#include "xalloc/runtime/install.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include "xalloc/bytes.h"
#include "xalloc/runtime/ledger.h"
#include "xalloc/torch_compat.h"

#include "raw_blocks.h"

namespace xalloc::runtime {

namespace {

// The bottom of the stack: libtorch's own CPU allocation (64-byte aligned), with an optional
// byte cap, shared with other processes through a ledger when one is configured.
class CpuBackend : public Upstream {
public:
  CpuBackend(std::int64_t limit, std::shared_ptr<Ledger> ledger)
      : limit_(limit), ledger_(std::move(ledger)) {}
  void* allocate(std::size_t bytes) override {
    const auto n = static_cast<std::int64_t>(bytes);
    if (limit_ > 0) {
      const std::int64_t now = used_.fetch_add(n) + n;
      if (now > limit_) {
        used_.fetch_sub(n);
        return nullptr;
      }
    }
    if (ledger_ && !ledger_->reserve(n)) {
      if (limit_ > 0)
        used_.fetch_sub(n);
      return nullptr;
    }
    void* p = nullptr;
    try {
      // alloc_cpu(0) is nullptr, which the ladder would read as a failure.
      p = c10::alloc_cpu(std::max<std::size_t>(bytes, 1));
    } catch (const c10::Error&) {
      p = nullptr;
    }
    if (!p) {
      if (limit_ > 0)
        used_.fetch_sub(n);
      if (ledger_)
        ledger_->unreserve(n);
    }
    return p;
  }
  void deallocate(void* p, std::size_t bytes) override {
    c10::free_cpu(p);
    if (limit_ > 0)
      used_.fetch_sub(static_cast<std::int64_t>(bytes));
    if (ledger_)
      ledger_->unreserve(static_cast<std::int64_t>(bytes));
  }
  std::string name() const override { return "cpu"; }

private:
  std::int64_t limit_;
  std::atomic<std::int64_t> used_{0};
  std::shared_ptr<Ledger> ledger_;
};

// Each allocation carries its size and its stack in a header of one alignment unit in front of
// the data, so the deleter (a plain function pointer) can free it through the right stack even
// after the stack was replaced.
constexpr std::size_t kHeader = c10::gAlignment;
struct Header {
  Upstream* stack;
  std::size_t bytes;
};
static_assert(sizeof(Header) <= kHeader, "header fits in one alignment unit");

void deleteBlock(void* data) {
  if (!data)
    return;
  detail::forgetRawBlock(data);
  auto* base = static_cast<char*>(data) - kHeader;
  Header h;
  std::memcpy(&h, base, sizeof h);
  h.stack->deallocate(base, h.bytes + kHeader);
}

class GracefulCpuAllocator final : public c10::Allocator {
public:
  c10::DataPtr allocate(size_t n) XALLOC_ALLOCATE_CONST override {
    Upstream* stack = current_.load(std::memory_order_acquire);
    void* base = nullptr;
    try {
      base = stack->allocate(n + kHeader);
    } catch (const OutOfMemory& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "xalloc: ", e.what());
    }
    TORCH_CHECK_WITH(OutOfMemoryError, base != nullptr, "xalloc: out of memory allocating ", n,
                     " bytes");
    Header h{stack, n};
    std::memcpy(base, &h, sizeof h);
    void* data = static_cast<char*>(base) + kHeader;
    detail::noteRawBlock(data, &deleteBlock);
    return {data, data, &deleteBlock, c10::Device(c10::DeviceType::CPU)};
  }
  XALLOC_ALLOCATOR_COPY_DATA
  // Raw frees go through the registry (raw_blocks.h): oneDNN frees a weight it packed before the
  // install through this allocator.
  c10::DeleterFnPtr raw_deleter() const override { return &detail::rawFree; }
  std::atomic<Upstream*> current_{nullptr};
};

struct State {
  std::mutex mu;
  GracefulCpuAllocator allocator;
  c10::Allocator* previous = nullptr;
  bool installed = false;
  std::vector<Stack> stacks;       // every stack ever installed: blocks may outlive their install
  std::vector<std::size_t> active; // the installs in force, innermost last (indices in stacks)
  // Release callbacks, each added to every stack (those installed later too) under its id.
  std::vector<std::pair<int, RetryStage::ReleaseCallback>> callbacks;
  int next_callback = 0;
};

State& state() {
  static State* s = new State; // never destroyed: deleters may run during static destruction
  return *s;
}

std::int64_t parseBytes(const char* var) {
  const char* v = std::getenv(var);
  if (!v || !*v)
    return 0;
  if (const auto bytes = parseByteSize(v)) {
    if (*bytes == 0)
      throw std::invalid_argument(std::string(var) + "='" + v +
                                  "': a cap of 0 bytes refuses every allocation (unset it for "
                                  "no cap)");
    return *bytes;
  }
  throw std::invalid_argument(std::string(var) + "='" + v + "': " + notAByteSize(v));
}

// Priority above the default allocator's 0, so install() wins; uninstall() restores with it.
constexpr std::uint8_t kPriority = 1;

} // namespace

std::shared_ptr<Upstream> makeCpuBackend(std::int64_t limit_bytes, std::shared_ptr<Ledger> ledger) {
  return std::make_shared<CpuBackend>(limit_bytes, std::move(ledger));
}

InstallOptions InstallOptions::fromEnvironment() {
  InstallOptions o;
  o.retry = RetryConfig::fromEnvironment();
  const char* log = std::getenv("XALLOC_LOG");
  o.log = log && std::string(log) != "0" && *log;
  if (const char* f = std::getenv("XALLOC_LOG_FILE"))
    o.log_path = f;
  if (const char* l = std::getenv("XALLOC_LEDGER"))
    o.ledger = l;
  o.limit_bytes = parseBytes("XALLOC_CPU_LIMIT");
  return o;
}

void install(const InstallOptions& o) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::shared_ptr<Ledger> ledger;
  if (!o.ledger.empty())
    ledger = Ledger::open(o.ledger, o.limit_bytes);
  auto backend = std::make_shared<CpuBackend>(ledger ? 0 : o.limit_bytes, ledger);
  s.stacks.push_back(makeStack(backend, o.retry, ledger, o.log, o.log_path));
  for (const auto& [id, cb] : s.callbacks)
    s.stacks.back().retry->addReleaseCallback(id, cb);
  s.active.push_back(s.stacks.size() - 1);
  s.allocator.current_.store(s.stacks.back().top.get(), std::memory_order_release);
  if (!s.installed) {
    s.previous = c10::GetAllocator(c10::DeviceType::CPU);
    c10::SetAllocator(c10::DeviceType::CPU, &s.allocator, kPriority);
    s.installed = true;
  }
}

void uninstall() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.installed || s.active.empty())
    return;
  s.active.pop_back();
  if (!s.active.empty()) {
    // The enclosing install is in force again, with its own cap and counters.
    s.allocator.current_.store(s.stacks[s.active.back()].top.get(), std::memory_order_release);
    return;
  }
  // libtorch's own allocator would free a oneDNN tensor made during the install with free():
  // the runtime's pass-through allocator frees it through the registry instead.
  c10::Allocator* back =
      s.previous == c10::GetDefaultCPUAllocator() ? detail::frontAllocator() : s.previous;
  c10::SetAllocator(c10::DeviceType::CPU, back, kPriority);
  s.installed = false;
}

bool installed() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.installed;
}

namespace {
// The stack whose counters stats() shows: the one in force, else the last one installed.
const Stack* shown(const State& s) {
  if (!s.active.empty())
    return &s.stacks[s.active.back()];
  return s.stacks.empty() ? nullptr : &s.stacks.back();
}
} // namespace

std::map<std::string, double> stats() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  const Stack* st = shown(s);
  return st ? st->stats->snapshot() : std::map<std::string, double>{};
}

void resetStats() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (const Stack* st = shown(s))
    st->stats->reset();
}

int addReleaseCallback(RetryStage::ReleaseCallback cb) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  const int id = s.next_callback++;
  for (Stack& st : s.stacks)
    st.retry->addReleaseCallback(id, cb);
  s.callbacks.emplace_back(id, std::move(cb));
  return id;
}

void removeReleaseCallback(int id) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.callbacks.erase(std::remove_if(s.callbacks.begin(), s.callbacks.end(),
                                   [&](const auto& c) { return c.first == id; }),
                    s.callbacks.end());
  for (Stack& st : s.stacks)
    st.retry->removeReleaseCallback(id);
}

} // namespace xalloc::runtime
