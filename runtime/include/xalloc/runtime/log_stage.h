// The log stage: each allocation event as one JSON line (XALLOC_LOG=1).
#pragma once

#include "xalloc/runtime/upstream.h"
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace xalloc::runtime {

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

} // namespace xalloc::runtime
