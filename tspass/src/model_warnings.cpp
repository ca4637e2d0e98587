// Model warnings: one line each, once per message.
#include "xalloc/tspass/model_warnings.h"

#include <mutex>
#include <set>

#include <c10/util/Exception.h>

#include "xalloc/tool.h"

namespace xalloc::tspass {

void reportModelWarning(const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> shown;
  std::lock_guard<std::mutex> lock(mu);
  if (shown.insert(msg).second)
    printWarning("", "the model warns: " + msg); // one line, its control characters escaped
}

namespace {
struct ModelWarningHandler : c10::WarningHandler {
  void process(const c10::Warning& warning) override { reportModelWarning(warning.msg()); }
};
} // namespace

void routeModelWarnings() {
  static ModelWarningHandler handler;
  c10::WarningUtils::set_warning_handler(&handler);
}

} // namespace xalloc::tspass
