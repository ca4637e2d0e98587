// LogStage: one JSON line per allocation event.
#include "xalloc/runtime/log_stage.h"

#include <cstring>

#include "alloc_detail.h"

namespace xalloc::runtime {

using detail::nowMs;

LogStage::LogStage(std::shared_ptr<Upstream> up, const std::string& path) : up_(std::move(up)) {
  if (!path.empty()) {
    out_ = std::fopen(path.c_str(), "a");
    owned_ = out_ != nullptr;
  }
  if (!out_)
    out_ = stderr;
}

LogStage::~LogStage() {
  if (owned_)
    std::fclose(out_);
}

void LogStage::write(const std::string& line) {
  std::lock_guard<std::mutex> g(mu_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void* LogStage::allocate(std::size_t bytes) {
  const double t0 = nowMs();
  void* p = up_->allocate(bytes);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "{\"event\":\"%s\",\"bytes\":%zu,\"ptr\":\"%p\",\"ms\":%.4f,\"t_ms\":%.3f}\n",
                p ? "alloc" : "alloc_failed", bytes, p, nowMs() - t0, t0);
  write(buf);
  return p;
}

void LogStage::deallocate(void* p, std::size_t bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"event\":\"free\",\"bytes\":%zu,\"ptr\":\"%p\",\"t_ms\":%.3f}\n", bytes, p,
                nowMs());
  write(buf);
  up_->deallocate(p, bytes);
}

std::size_t LogStage::emptyCache() {
  const std::size_t freed = up_->emptyCache();
  char buf[120];
  std::snprintf(buf, sizeof buf, "{\"event\":\"empty_cache\",\"bytes\":%zu,\"t_ms\":%.3f}\n", freed,
                nowMs());
  write(buf);
  return freed;
}

} // namespace xalloc::runtime
