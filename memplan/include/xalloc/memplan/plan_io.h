// Planning instances and plans as JSON: `{"tensors":[{"id","size","first_op","last_op",
// "alignment"?,"offset"?}]}` in, `{"offsets":{id: offset},"workspace_bytes",
// "lower_bound_bytes","heuristic",...}` out; and instances taken from a profile's records.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "xalloc/formats/profile.h"
#include "xalloc/memplan/planner.h"

namespace xalloc::formats {
class JsonReader;
}

namespace xalloc::memplan {

/// Reads `{"tensors":[...]}`; ids may be strings or integers. Throws FormatError at the field.
std::vector<TensorSpec> readTensors(const formats::JsonReader& r);

/// One tensor per storage a profiled run allocated (graph inputs and op outputs; module weights
/// excluded), alive from its first producer to the last reader of any view of it. Ids are
/// "s<storage id>".
std::vector<TensorSpec> tensorsFromProfile(const formats::Profile& profile);

nlohmann::json planToJson(const std::vector<TensorSpec>& tensors, const Plan& plan,
                          const PlanOptions& options);

} // namespace xalloc::memplan
