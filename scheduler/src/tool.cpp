// xsched: read a profile and a cost model, decide every site, write schedule.json.
#include "xalloc/scheduler/tool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>

#include <nlohmann/json.hpp>

#include "xalloc/bytes.h"
#include "xalloc/costfit/stride.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/tool.h"
#include "xalloc/version.h"

namespace xalloc::scheduler {

namespace {
// A cost.json from an older xprof has its model's conversions timed into a reused buffer only:
// a portable plan would count a 37 MiB conversion at a third of what aten::contiguous pays.
void warnUnmeasuredOutputs(const formats::Cost& cost, const std::string& name) {
  for (const auto& c : cost.conversion_cost_table)
    if (c.source == "model" && !c.allocation_ms) {
      printWarning(name, "its conversion costs leave out what a fresh output costs (measured "
                         "by an older xprof): large conversions may cost more than predicted; "
                         "profile the model again");
      return;
    }
}
} // namespace

int runXsched(const XschedOptions& o) {
  SchedOptions so;
  so.min_gain_ms = o.min_gain_ms;
  so.z = o.z;
  so.min_relative_gain = o.min_relative_gain;
  so.min_region_gain = o.min_region_gain;
  so.min_model_gain = o.min_model_gain;
  if (o.memory_budget) {
    so.memory_budget_bytes = requireByteSize(*o.memory_budget, "xsched", "--memory-budget");
  }
  for (const double v : {o.min_gain_ms, o.z, o.min_relative_gain, o.min_model_gain,
                         o.min_region_gain, o.async_overhead_ms})
    if (!(v >= 0) || !std::isfinite(v))
      throw InputError("xsched", "--min-gain-ms, --min-relative-gain, --min-model-gain, "
                                 "--min-region-gain, --async-overhead-ms and --z must be finite "
                                 "non-negative numbers");
  checkOutputPath(o.output);
  if (!(o.window_safety > 0 && o.window_safety <= 1))
    throw InputError("xsched", "--window-safety must be in (0, 1]");
  if (o.async_workers < 1)
    throw InputError("xsched", "--async-workers must be at least 1");
  if (o.node_limit < 1 || !(o.time_limit_ms > 0))
    throw InputError("xsched", "--node-limit and --time-limit-ms must be positive");
  so.window_safety = o.window_safety;
  so.async_workers = o.async_workers;
  const auto form = formats::fromString<formats::RewriteForm>(o.form);
  if (!form)
    throw InputError("xsched", "--form must be " + formats::namesOf<formats::RewriteForm>() +
                                   ", not '" + o.form + "'");
  so.form = *form;
  so.allow_async = !o.no_async;
  if (!(o.async_overhead_ms >= 0))
    throw InputError("xsched", "--async-overhead-ms must be non-negative");
  so.async_overhead_ms = o.async_overhead_ms;
  so.limits.node_limit = o.node_limit;
  so.limits.time_limit_ms = o.time_limit_ms;
  formats::checkToleranceFlags(o.tolerance, o.exact, "xsched");
  so.tolerance = o.exact ? 0.0 : o.tolerance.value_or(formats::kDefaultTolerance);
  so.within_noise = !o.exact && !o.tolerance;

  // Documents come from the named files, or from the stream on stdin for what is not named.
  std::optional<formats::DocumentSet> stream;
  auto fromStream = [&]() -> const formats::DocumentSet& {
    if (!stream) {
      inputIsStdin("xsched", "", "--profile and --cost");
      stream = formats::DocumentSet::read("-");
    }
    return *stream;
  };
  formats::Profile profile =
      o.profile.empty() || o.profile == "-"
          ? formats::profileFromJson(fromStream().require(formats::DocKind::Profile),
                                     fromStream().name())
          : formats::loadProfile(o.profile);
  formats::Cost cost =
      o.cost.empty() || o.cost == "-"
          ? formats::costFromJson(fromStream().require(formats::DocKind::Cost), fromStream().name())
          : formats::loadCost(o.cost);
  if (costfit::dropStaleStrideModels(cost))
    printWarning(o.cost.empty() || o.cost == "-" ? fromStream().name() : o.cost,
                 costfit::kStaleStrideModel);

  warnUnmeasuredOutputs(cost, o.cost.empty() || o.cost == "-" ? fromStream().name() : o.cost);
  if (!profile.model.sha256.empty() && !cost.model.sha256.empty() &&
      profile.model.sha256 != cost.model.sha256 && !o.foreign_cost)
    throw InputError("xsched", "the profile is of " + profile.model.path + " (sha256 " +
                                   profile.model.sha256.substr(0, 12) +
                                   ") but the cost model was fitted on " + cost.model.path +
                                   " (sha256 " + cost.model.sha256.substr(0, 12) +
                                   "); pass --foreign-cost to use it anyway");
  // Other shapes: the same model, frozen as the profile is, each at shapes of its own.
  std::vector<formats::Profile> others;
  std::vector<std::string> seen{inputShapes(profile)};
  for (const std::string& path : o.shape_profiles) {
    formats::Profile q = formats::loadProfile(path);
    if (!profile.model.sha256.empty() && !q.model.sha256.empty() &&
        q.model.sha256 != profile.model.sha256)
      throw InputError(path, "profiles " + q.model.path + " (sha256 " +
                                 q.model.sha256.substr(0, 12) +
                                 "), not the model of the profile, " + profile.model.path +
                                 " (sha256 " + profile.model.sha256.substr(0, 12) + ")");
    if (q.model.frozen.value_or(false) != profile.model.frozen.value_or(false))
      throw InputError(path,
                       "profiles the model " +
                           std::string(q.model.frozen.value_or(false) ? "frozen" : "unfrozen") +
                           ", the profile does not: profile both with or without --freeze");
    const std::string shapes = inputShapes(q);
    if (shapes.empty() || seen.front().empty())
      throw InputError(path, "records no input shapes to plan over (profiled from --input-file?)");
    if (std::find(seen.begin(), seen.end(), shapes) != seen.end())
      throw InputError(path, "measures input shapes " + shapes + ", as another profile does");
    seen.push_back(shapes);
    others.push_back(std::move(q));
  }
  if (!others.empty())
    so.other_shapes = &others;
  formats::Schedule schedule = makeSchedule(profile, cost, so);
  schedule.tool_version = kVersion;
  if (!o.trace.empty())
    writeFileAtomic(o.trace, planTraceJson(schedule));
  std::vector<nlohmann::json> passthrough;
  if (stream)
    passthrough = stream->documents();
  formats::emitDocument(o.output, passthrough, formats::toJson(schedule));
  if (o.explain) {
    bool doc_on_stdout = o.output.empty() || o.output == "-";
    (doc_on_stdout ? std::cerr : std::cout) << explainSchedule(schedule);
  }
  return kExitOk;
}

} // namespace xalloc::scheduler
