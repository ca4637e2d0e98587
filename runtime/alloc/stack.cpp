// makeStack: stats -> log -> retry -> backend.
#include "xalloc/runtime/stack.h"

#include "xalloc/runtime/ledger.h"
#include "xalloc/runtime/log_stage.h"

namespace xalloc::runtime {

Stack makeStack(std::shared_ptr<Upstream> backend, const RetryConfig& config,
                std::shared_ptr<Ledger> ledger, bool log, const std::string& log_path) {
  Stack s;
  s.stats = std::make_shared<Stats>();
  if (ledger)
    ledger->startResponder([backend] { return static_cast<std::int64_t>(backend->emptyCache()); });
  s.retry = std::make_shared<RetryStage>(std::move(backend), config, s.stats, std::move(ledger));
  std::shared_ptr<Upstream> below = s.retry;
  if (log)
    below = std::make_shared<LogStage>(below, log_path);
  s.top = std::make_shared<StatsStage>(below, s.stats);
  return s;
}

} // namespace xalloc::runtime
