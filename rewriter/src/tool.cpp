// xrewrite: read the schedule and dispatch to the TorchScript rewriter.
#include "xalloc/rewriter/tool.h"

#include <nlohmann/json.hpp>

#include "torchscript_rewrite.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/tool.h"

namespace xalloc::rewriter {

int runXrewrite(const XrewriteOptions& o) {
  if (!o.show.empty())
    return showStoredSchedule(o.show);
  if (o.model.empty())
    throw InputError("xrewrite", "no model: give the TorchScript file to rewrite");
  if (o.output.empty() && !o.check && !o.diff)
    throw InputError("xrewrite", "no output: give -o OUT.pt (or --check / --diff for a dry run)");
  if (!o.output.empty() && o.output == o.model)
    throw InputError("xrewrite", "-o names the input model; write to another file");
  if (o.form != "portable" && o.form != "fast")
    throw InputError("xrewrite", "--form: '" + o.form + "' is neither 'portable' nor 'fast'");
  if (o.verify_runs < 1)
    throw InputError("xrewrite", "--verify-runs must be at least 1");
  bool from_stdin = inputIsStdin("xrewrite", o.schedule, "--schedule schedule.json");
  auto set = formats::DocumentSet::read(from_stdin ? "-" : o.schedule);
  const auto& doc = set.require(formats::DocKind::Schedule);
  formats::Schedule schedule = formats::scheduleFromJson(doc, set.name());
  return rewriteTorchScript(o, schedule, formats::dumpDocument(doc, false));
}

} // namespace xalloc::rewriter
