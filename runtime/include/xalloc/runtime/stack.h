// The default stack of stages over a backend: stats, then a log when asked, then the retry
// ladder (RMM style: each stage wraps the one below).
#pragma once

#include "xalloc/runtime/retry.h"
#include "xalloc/runtime/stats.h"
#include "xalloc/runtime/upstream.h"
#include <memory>
#include <string>

namespace xalloc::runtime {

class Ledger;

/// A stack as the environment configures it: stats, then a log when XALLOC_LOG=1, then the
/// retry ladder, over `backend`.
struct Stack {
  std::shared_ptr<Stats> stats;
  std::shared_ptr<RetryStage> retry;
  std::shared_ptr<Upstream> top;
};
Stack makeStack(std::shared_ptr<Upstream> backend, const RetryConfig& config,
                std::shared_ptr<Ledger> ledger = nullptr, bool log = false,
                const std::string& log_path = "");

} // namespace xalloc::runtime
