// xprof: profile a TorchScript model and write profile.json.
#include "xalloc/profiler/tool.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/profiler/inputs.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/runtime/async.h"
#include "xalloc/tool.h"

namespace xalloc::profiler {

int runXprof(XprofOptions o) {
  if (o.profile.model.empty())
    throw InputError("xprof", "no model: give a TorchScript file (xprof MODEL.pt)");
  auto specs = specsFromFlags(o.input_shapes, o.input_dtypes, o.input_ranges, "xprof");
  if (!specs.empty())
    o.profile.inputs = std::move(specs);
  runtime::loadOps(); // models rewritten in the fast form use xalloc:: ops
  formats::Profile p = profileModel(o.profile);
  emitDocument(o.output, {}, formats::toJson(p));
  if (!o.quiet && !o.output.empty() && o.output != "-")
    std::cerr << launch::summaryLine(p) << " -> " << o.output << "\n";
  // The reference BLAS makes every linear several times slower than any layout costs, and
  // makes transposed weights look worth converting; the user should know.
  if (const std::string note = launch::referenceBlasNote(p); !o.quiet && !note.empty())
    printNote(o.profile.model, note);
  return kExitOk;
}

} // namespace xalloc::profiler
