// xrewrite-core: read the schedule and dispatch to the TorchScript rewriter, or to the C++ one
// (cpp_tool.cpp, which xrewrite's front also runs without libtorch).
#include "xalloc/rewriter/tool.h"

#include <string>

#include "torchscript_rewrite.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/op_library.h"
#include "xalloc/rewriter/cli.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/model_warnings.h"

namespace xalloc::rewriter {

int runXrewrite(const XrewriteOptions& o) {
  tspass::routeModelWarnings(); // verification runs the model through the JIT
  for (const auto& lib : o.op_libraries)
    loadOpLibrary(lib);
  if (!o.show.empty())
    return showStoredSchedule(o.show, o.method);
  formats::checkToleranceFlags(o.tolerance, o.exact, "xrewrite");
  if (!o.cpp_files.empty())
    return runXrewriteCpp(o);
  checkModelOptions(o);
  bool from_stdin = inputIsStdin("xrewrite", o.schedule, "--schedule schedule.json");
  auto set = formats::DocumentSet::read(from_stdin ? "-" : o.schedule);
  const auto& doc = set.require(formats::DocKind::Schedule);
  formats::Schedule schedule = formats::scheduleFromJson(doc, set.name());
  // A schedule's anchors belong to the method it was profiled on: applied to another one they
  // could match look-alike expressions there (every nn.Linear shares its anchor text).
  XrewriteOptions with_method = withForm(o, schedule, set.name());
  const std::string& profiled = schedule.model.method;
  if (with_method.method.empty())
    with_method.method = profiled.empty() ? "forward" : profiled;
  else if (!profiled.empty() && profiled != with_method.method)
    throw InputError(set.name(), "the schedule was made for method '" + profiled + "', not '" +
                                     with_method.method +
                                     "': profile that method (xprof --method " +
                                     with_method.method + ") or leave --method out");
  return rewriteTorchScript(with_method, schedule, formats::dumpDocument(doc, false));
}

} // namespace xalloc::rewriter
