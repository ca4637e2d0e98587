// xsched memplan: plan offsets for a tensor list (or a profile's tensors) and report how close
// the plan is to the lower bound.
#include <nlohmann/json.hpp>

#include "xalloc/bytes.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/io.h"
#include "xalloc/memplan/plan_io.h"
#include "xalloc/memplan/planner.h"
#include "xalloc/scheduler/tool.h"
#include "xalloc/tool.h"

namespace xalloc::scheduler {

int runMemplan(const MemplanOptions& o) {
  if (o.alignment < 1)
    throw InputError("xsched memplan", "--alignment must be at least 1");
  std::optional<std::int64_t> budget;
  if (o.budget)
    budget = requireByteSize(*o.budget, "xsched memplan", "--budget");
  const bool from_stdin = inputIsStdin("xsched memplan", o.input, "a tensor list or profile.json");
  auto set = formats::DocumentSet::read(from_stdin ? "-" : o.input);
  std::vector<memplan::TensorSpec> tensors;
  if (const auto* profile = set.find(formats::DocKind::Profile)) {
    tensors = memplan::tensorsFromProfile(formats::profileFromJson(*profile, set.name()));
  } else {
    const auto& doc = set.documents().back();
    try {
      tensors = memplan::readTensors(formats::JsonReader(doc));
    } catch (const formats::FormatError& e) {
      throw formats::inputErrorAt(e, set.name());
    }
  }
  if (std::string problem = memplan::validateTensors(tensors); !problem.empty())
    throw InputError(set.name(), problem);
  memplan::PlanOptions po;
  po.alignment = o.alignment;
  po.search_iterations = o.search_iterations;
  po.verify = true; // cheap next to planning, and a wrong plan would corrupt memory
  memplan::Plan plan = memplan::planMemory(tensors, po);
  if (budget) {
    try {
      memplan::requireWithinBudget(plan, *budget);
    } catch (const memplan::OutOfMemory& e) {
      throw InputError("xsched memplan", e.what());
    }
  }
  nlohmann::json out = memplan::planToJson(tensors, plan, po);
  writeFileAtomic(o.output.empty() ? "-" : o.output,
                  formats::dumpDocument(out, o.output.empty() || o.output == "-"));
  return kExitOk;
}

} // namespace xalloc::scheduler
