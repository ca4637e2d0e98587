// Rewriting a TorchScript model with a schedule: apply the graph pass, diff, verify, save.
#pragma once

#include <string>

#include "xalloc/formats/schedule.h"
#include "xalloc/rewriter/tool.h"

namespace xalloc::rewriter {

int rewriteTorchScript(const XrewriteOptions& options, const formats::Schedule& schedule,
                       const std::string& schedule_text);

/// `xrewrite --show MODEL.pt`: the schedule stored in a rewritten model.
int showStoredSchedule(const std::string& model);

} // namespace xalloc::rewriter
