// Rewriting a TorchScript model with a schedule: apply the graph pass, diff, verify, save.
#pragma once

#include <string>

#include "xalloc/formats/schedule.h"
#include "xalloc/rewriter/tool.h"

namespace xalloc::rewriter {

int rewriteTorchScript(const XrewriteOptions& options, const formats::Schedule& schedule,
                       const std::string& schedule_text);

/// `xrewrite --show MODEL.pt [--method NAME]`: the schedule stored in a rewritten model for
/// `method`; with none given, the only one stored, or forward's where several are.
int showStoredSchedule(const std::string& model, const std::string& method);

} // namespace xalloc::rewriter
