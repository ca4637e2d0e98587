// xrewrite for TorchScript models: anchors -> graph edits -> verified, atomically saved model.
#include "torchscript_rewrite.h"

#include "noise_verdict.h"
#include "verify_outputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/math_libraries.h"
#include "xalloc/rewriter/text_diff.h"
#include "xalloc/runtime/async.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/specialize.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::rewriter {

namespace {

void reportResults(const tspass::ApplyReport& report, const formats::Schedule& s, bool quiet) {
  for (const auto& r : report.results) {
    const auto& d = s.decisions[r.decision_index];
    std::string what = d.anchor.expr.empty() ? "%" + d.value_name : "`" + d.anchor.expr + "`";
    std::string msg = std::string(formats::actionName(r.action)) + " " + what + ": " +
                      tspass::applyStatusName(r.status) + ": " + r.message;
    if (r.status == tspass::ApplyStatus::Skipped ||
        (r.status == tspass::ApplyStatus::NotFound && r.action != formats::Action::Remove))
      printWarning(r.anchor.location(), msg);
    else if (!quiet)
      printNote(r.anchor.location(), msg);
  }
}

// A schedule's savings were measured on the BLAS of the machine that profiled it; under another
// (the reference BLAS against OpenBLAS) a linear runs ten times faster or slower, and what pays
// there may not pay here. Verification still guards the bits; this warns about the speed.
void warnIfOtherMathLibraries(const formats::Schedule& schedule, const std::string& where) {
  if (!schedule.device || schedule.device->libraries.empty())
    return;
  const std::string here = xalloc::mathLibraries();
  if (here.empty() || here == schedule.device->libraries)
    return;
  // The first library that differs: another file, or the same one changed since.
  const auto then = xalloc::splitLibraries(schedule.device->libraries);
  const auto now = xalloc::splitLibraries(here);
  std::size_t i = 0;
  while (i < std::min(then.size(), now.size()) && then[i] == now[i])
    ++i;
  const std::string was = i < then.size() ? xalloc::libraryPath(then[i]) : "none";
  const std::string is = i < now.size() ? xalloc::libraryPath(now[i]) : "none";
  printWarning(where, "the schedule was profiled on other math libraries (" +
                          (was == is ? was + ", changed since" : was + ", here " + is) +
                          "): its savings may not hold here; profile again on this machine");
}

// A schedule's timings hold at the thread count they were measured at (libtorch's and the
// BLAS's, set together): say so when the model is about to be checked at another.
void noteThreadCount(const formats::Schedule& schedule, const std::string& where, bool quiet) {
  if (quiet || !schedule.device || schedule.device->threads < 1)
    return;
  const int now = at::get_num_threads();
  if (now == schedule.device->threads)
    return;
  printNote(where, "the schedule was measured at " + std::to_string(schedule.device->threads) +
                       " thread(s) (libtorch and BLAS); its savings hold for runs at that count, "
                       "not at this process's " +
                       std::to_string(now));
}

// aten::batch_norm ops in `method`'s graph with its calls inlined: what freezing folds.
std::size_t batchNorms(const torch::jit::Module& module, const std::string& method) {
  auto m = module.find_method(method.empty() ? "forward" : method);
  if (!m)
    return 0;
  auto g = m->graph()->copy();
  torch::jit::Inline(*g);
  std::size_t n = 0;
  for (const torch::jit::Node* node : g->nodes())
    n += node->kind() == c10::Symbol::fromQualString("aten::batch_norm");
  return n;
}

// "a/model.pt::forward" like git; absolute paths keep no prefix.
std::string diffLabel(const char* prefix, const std::string& path, const std::string& method) {
  return (path.empty() || path[0] == '/' ? "" : prefix) + path + "::" + method;
}

// The schedule as stored in the rewritten model: the fusions that ran after the regions, in its
// summary; everything else as it was read.
std::string withFusions(const std::string& schedule_text,
                        const std::vector<tspass::FusionRun>& fusions) {
  if (fusions.empty())
    return schedule_text;
  nlohmann::json j = nlohmann::json::parse(schedule_text);
  j["summary"]["fusions"] = nlohmann::json::array();
  for (const auto& f : fusions)
    j["summary"]["fusions"].push_back({{"name", f.name}, {"count", f.count}});
  return j.dump(2) + "\n";
}

// The fusions that ran, for the log: "squeeze_excite 9, channel_shuffle 0, ...".
std::string fusionsNote(const std::vector<tspass::FusionRun>& fusions,
                        const std::vector<std::string>& off) {
  std::string s = "fusions after the regions: ";
  for (std::size_t i = 0; i < fusions.size(); ++i)
    s += (i ? ", " : "") + fusions[i].name + " " + std::to_string(fusions[i].count);
  if (!off.empty()) {
    s += " (switched off:";
    for (const auto& f : off)
      s += " " + f;
    s += ")";
  }
  return s;
}

// The schedule as stored in the rewritten model: the tolerance it was verified at and the error
// measured, in its summary; everything else as it was read.
std::string withMeasuredError(const std::string& schedule_text, double tolerance, double error) {
  nlohmann::json j = nlohmann::json::parse(schedule_text);
  j["summary"]["tolerance"] = tolerance;
  if (std::isfinite(error)) // JSON holds no infinity: an unbounded error is not recorded
    j["summary"]["measured_error"] = error;
  return j.dump(2) + "\n";
}

// What the rewrite is verified on, first found of: --input-file, --input-shape and friends, the
// inputs the profile was measured on (carried by the schedule), the model's own example inputs.
struct VerifyInputs {
  std::vector<formats::InputSpec> specs;
  std::string file; // inputs read from this file (then `fixed` holds them)
  std::vector<c10::IValue> fixed;
  std::string origin;  // " (the profile's)" when they came from the schedule
  std::string missing; // why nothing can be verified, when nothing was found
};

// Reads an input file before anything is written: a bad file leaves nothing behind.
VerifyInputs verifyInputs(const XrewriteOptions& o, const formats::Schedule& schedule,
                          tspass::LoadedModel& model) {
  VerifyInputs v;
  v.file = o.input_file;
  v.specs =
      xalloc::tspass::specsFromFlags(o.input_shapes, o.input_dtypes, o.input_ranges, "xrewrite");
  if (v.file.empty() && v.specs.empty()) {
    v.origin = " (the profile's)";
    if (!schedule.input_file.empty() && isRegularFile(schedule.input_file))
      v.file = schedule.input_file;
    else
      v.specs = schedule.inputs;
  }
  if (v.file.empty() && v.specs.empty()) {
    v.origin.clear();
    v.specs = xalloc::tspass::specFromExtraFiles(model.extra_files, o.model);
  }
  if (!v.file.empty()) {
    v.fixed = xalloc::tspass::parseInputFile(readFile(v.file), v.file);
    (void)xalloc::tspass::methodInputs(model.module, o.method, v.fixed, o.model); // do they fit?
  } else if (v.specs.empty()) {
    v.missing = schedule.input_file.empty()
                    ? "outputs not verified: the model has no example inputs (pass --input-shape, "
                      "or --no-verify to silence this)"
                    : "outputs not verified: the profile's input file " + schedule.input_file +
                          " is not there (pass --input-file, or --no-verify to silence this)";
  }
  return v;
}

// The ranks of the method's inputs after self, which layout regions are found with: those of
// the inputs given (--input-file, --input-shape), else of the profile's, else of the model's
// example inputs; unknown when none are known (then no region is found).
std::vector<std::optional<int>> inputRanks(const XrewriteOptions& o,
                                           const formats::Schedule& schedule,
                                           const tspass::LoadedModel& model) {
  auto fromSpecs = [](const std::vector<formats::InputSpec>& specs) {
    std::vector<std::optional<int>> r;
    for (const auto& s : specs)
      r.push_back(static_cast<int>(s.shape.size()));
    return r;
  };
  std::string file = o.input_file;
  auto specs =
      xalloc::tspass::specsFromFlags(o.input_shapes, o.input_dtypes, o.input_ranges, "xrewrite");
  if (file.empty() && specs.empty()) {
    if (!schedule.input_file.empty() && isRegularFile(schedule.input_file))
      file = schedule.input_file;
    else
      specs = schedule.inputs;
  }
  if (!file.empty())
    return tspass::inputRanks(xalloc::tspass::parseInputFile(readFile(file), file));
  if (specs.empty())
    specs = xalloc::tspass::specFromExtraFiles(model.extra_files, o.model);
  return fromSpecs(specs);
}

std::string specializedNote(const tspass::Specialized& s) {
  std::string what = "specialized to the inputs' ranks, as xprof profiled it:";
  if (s.rank_reads > 0)
    what += " " + std::to_string(s.rank_reads) + " rank check(s) (x.dim()) now constants";
  if (s.dict_reads > 0)
    what += std::string(s.rank_reads > 0 ? "," : "") + " " + std::to_string(s.dict_reads) +
            " read(s) of a dict's item now read the value stored";
  return what;
}

} // namespace

int rewriteTorchScript(const XrewriteOptions& o, const formats::Schedule& schedule,
                       const std::string& schedule_text) {
  // Models rewritten in the fast form use xalloc:: ops: register them before any model loads.
  runtime::loadOps();
  tspass::LoadedModel model = tspass::loadModel(o.model);
  VerifyInputs verify;
  if (o.verify && !o.output.empty())
    verify = verifyInputs(o, schedule, model);
  // --exact, --tolerance, the tolerance the schedule was planned for, the default: in that order.
  const double tolerance =
      o.exact
          ? 0.0
          : o.tolerance.value_or(schedule.summary.tolerance.value_or(formats::kDefaultTolerance));
  // Beside the default tolerance, float32's own noise (formats::noiseBound); an explicit
  // --tolerance, or one the schedule was planned for, is a hard bound.
  const bool within_noise =
      !o.exact && !o.tolerance &&
      (!schedule.summary.tolerance || *schedule.summary.tolerance == formats::kDefaultTolerance);
  warnIfOtherMathLibraries(schedule, o.schedule.empty() ? "<stdin>" : o.schedule);
  noteThreadCount(schedule, o.schedule.empty() ? "<stdin>" : o.schedule, o.quiet);
  if (!schedule.model.sha256.empty() && schedule.model.sha256 != model.sha256 && !o.quiet)
    printNote(o.model, "the schedule was made for " + schedule.model.path +
                           " (another file); decisions are matched by source anchor");
  // Frozen first (--freeze): the schedule's anchors are source locations, which freezing keeps;
  // sites it folds away (a constant weight's transpose) are reported as not found.
  std::string unfrozen_text; // what the diff starts from when freezing changes the graph
  if (o.freeze && o.diff && !tspass::isFrozen(model.module)) {
    tspass::LoadedModel copy = tspass::loadModel(o.model);
    tspass::canonicalize(copy, o.method);
    auto g = tspass::inlineMethod(copy.module, o.method);
    tspass::useOriginalSourceRanges(*g);
    unfrozen_text = tspass::graphText(*g);
  }
  const std::size_t norms_before = o.freeze ? batchNorms(model.module, o.method) : 0;
  const bool froze = o.freeze && tspass::freezeModel(model, o.method);
  if (o.freeze && !o.quiet) {
    const std::size_t norms_after = froze ? batchNorms(model.module, o.method) : norms_before;
    std::string what = "frozen as torch.jit.freeze does: weights are constants now";
    if (norms_before > norms_after)
      what += ", and " + std::to_string(norms_before - norms_after) +
              " batch norm(s) are folded into the convolutions before them";
    printNote(o.model, froze ? what : "already frozen: --freeze changes nothing");
  }
  // The form the saved result will have, so ops are numbered as they will be when it is read.
  tspass::canonicalize(model, o.method);
  auto graph = tspass::inlineMethod(model.module, o.method);
  tspass::useOriginalSourceRanges(*graph);
  const std::string before = tspass::graphText(*graph);
  // Frozen, specialized to the inputs' ranks as xprof specialized it before numbering.
  const auto ranks = inputRanks(o, schedule, model);
  const tspass::Specialized specialized = tspass::specializeToInputRanks(model, o.method, ranks);
  if (specialized.changed()) {
    graph = tspass::inlineMethod(model.module, o.method);
    tspass::useOriginalSourceRanges(*graph);
    if (!o.quiet)
      printNote(o.model, specializedNote(specialized));
  }
  // Whole regions found first, on the graph as xprof found them (frozen, linears as they are),
  // and marked; they are rewritten after the value decisions, which renumber linears.
  const tspass::MarkedRegions marked =
      tspass::markRegionDecisions(*graph, schedule, ranks, tspass::isFrozen(model.module),
                                  o.form == formats::RewriteForm::Fast);
  // Numbered as xprof numbered it: with linears exposed; those no decision touched go back.
  const auto exposed = tspass::exposeLinearWeights(*graph);
  tspass::ApplyOptions apply;
  apply.async_as_sync = o.form != formats::RewriteForm::Fast;
  apply.module = &model.module;
  tspass::ApplyReport report = tspass::applySchedule(graph, schedule, apply);
  std::vector<tspass::Renumbered> renumbered;
  tspass::restoreLinears(exposed, &renumbered);
  // Then the marked regions, each re-laid into the layout the schedule chose.
  const tspass::ApplyReport regions = tspass::applyMarkedRegions(
      *graph, schedule, marked, {o.no_fusions.begin(), o.no_fusions.end()});
  report.results.insert(report.results.end(), regions.results.begin(), regions.results.end());
  if (!o.quiet && !regions.fusions.empty())
    printNote(o.model, fusionsNote(regions.fusions, o.no_fusions));
  const std::string stored = withFusions(schedule_text, regions.fusions);
  const std::string after = tspass::withOriginalNumbers(tspass::graphText(*graph), renumbered);
  reportResults(report, schedule, o.quiet);

  const std::string out_name = o.output.empty() ? o.model : o.output;
  if (o.diff)
    std::cout << unifiedDiff(froze ? unfrozen_text : before, after,
                             diffLabel("a/", o.model, o.method),
                             diffLabel("b/", out_name, o.method));
  const std::size_t applied = report.count(tspass::ApplyStatus::Applied);
  if (!o.quiet)
    std::cerr << "xrewrite: " << applied << " applied, "
              << report.count(tspass::ApplyStatus::AlreadyApplied) << " already applied, "
              << report.count(tspass::ApplyStatus::NotFound) << " not found, "
              << report.count(tspass::ApplyStatus::Skipped) << " skipped\n";
  if (o.check)
    return report.changed() || froze ? kExitChangesNeeded : kExitOk;
  if (o.output.empty())
    return kExitOk; // --diff alone: a dry run

  auto extra = model.extra_files;
  extra[tspass::scheduleFileFor(o.method)] = stored;
  // Nothing changed (no decision applied, nothing frozen): the model as it was loaded, with its
  // methods and submodules, not the canonical form the rewrite works on (every method inlined);
  // only the schedule is stored with it. Its outputs are the original's by construction.
  if (!report.changed() && !froze) {
    const tspass::LoadedModel original = tspass::loadModel(o.model);
    extra[tspass::scheduleFileFor(o.method)] = withMeasuredError(schedule_text, tolerance, 0.0);
    writeFileAtomic(o.output, tspass::modelBytes(original.module, extra, o.output));
    if (!o.quiet)
      std::cerr << "xrewrite: nothing to change; wrote " << o.output
                << ": the input model as it is, with the schedule stored\n";
    return kExitOk;
  }
  // Verified from memory (no temporary file a SIGKILL could leave behind); the output is
  // written once, at the end, by the one writer (atomic, links followed, mode kept).
  std::string bytes = tspass::modelBytes(model.module, extra, o.output);
  if (o.verify) {
    if (!verify.missing.empty()) {
      printWarning(o.model, verify.missing);
    } else {
      const Verified v = verifyOutputs(o.model, bytes, o.output, o.method, verify.specs,
                                       o.verify_runs, verify.file.empty() ? nullptr : &verify.fixed,
                                       verify.file, tolerance, froze, within_noise);
      if (v.problem.empty()) {
        // What was measured travels with the model: its stored schedule says it.
        extra[tspass::scheduleFileFor(o.method)] = withMeasuredError(stored, tolerance, v.error);
        bytes = tspass::modelBytes(model.module, extra, o.output);
      }
      if (v.problem.empty() && v.elements == 0)
        printWarning(o.model, "the original's outputs hold no elements on any input checked (an "
                              "empty batch?), so nothing was compared: verify with --input-file "
                              "inputs that give outputs");
      else if (v.problem.empty() && v.constant_outputs)
        printWarning(o.model, "the original's outputs hold one repeated value on every input "
                              "checked (all zeros, say), so the check cannot tell a wrong rewrite: "
                              "verify with --input-file inputs that move them");
      if (!v.problem.empty()) {
        if (tolerance <= 0)
          throw InputError(o.output, "the rewritten model is not bit-identical to the original "
                                     "(outputs differ " +
                                         v.problem + "; --exact); nothing was written");
        throw InputError(o.output, "the rewritten model's outputs differ from the original's by " +
                                       sci(v.error) + " (element by element) " + v.problem +
                                       ", more than the tolerance " + sci(tolerance) +
                                       "; nothing was written");
      }
      if (!o.quiet) {
        const std::string on =
            verify.file.empty()
                ? std::to_string(o.verify_runs) + " example input(s)" + verify.origin
                : "the inputs of " + verify.file + verify.origin + " and " +
                      std::to_string(o.verify_runs) + " fresh input(s) shaped like them";
        if (v.elements == 0)
          std::cerr << "xrewrite: outputs empty on " << on << ": nothing compared\n";
        else if (v.same_bits)
          std::cerr << "xrewrite: outputs bit-identical to the original on " << on << "\n";
        else if (!v.bound_why.empty())
          std::cerr << "xrewrite: outputs within " << sci(v.error) << " of the original's"
                    << (v.unordered ? " (compared blind to order)" : "") << " on " << on
                    << (v.error > tolerance ? ": beyond the tolerance " + sci(tolerance) + ", but"
                                            : ":")
                    << " no more than " << v.bound_why << "\n";
        else
          std::cerr << "xrewrite: outputs within " << sci(tolerance) << " of the original's "
                    << "(measured " << sci(v.error) << ") on " << on << "\n";
      }
    }
  }
  writeFileAtomic(o.output, bytes);
  if (!o.quiet)
    std::cerr << "xrewrite: wrote " << o.output << "\n";
  return kExitOk;
}

int showStoredSchedule(const std::string& path, const std::string& method) {
  tspass::LoadedModel model = tspass::loadModel(path);
  // The methods with a stored schedule, by the extra files' names.
  std::map<std::string, std::string> stored;
  for (const auto& [name, text] : model.extra_files)
    if (const std::string m = tspass::methodOfScheduleFile(name); !m.empty())
      stored[m] = text;
  if (stored.empty())
    throw InputError(path, "no schedule stored in this model (it was not written by xrewrite)");
  std::string names;
  for (const auto& [name, text] : stored)
    names += (names.empty() ? "" : ", ") + name;
  auto it = stored.end();
  if (!method.empty()) {
    it = stored.find(method);
    if (it == stored.end())
      throw InputError(path,
                       "no schedule stored for method '" + method + "' (stored: " + names + ")");
  } else if (stored.size() == 1) {
    it = stored.begin();
  } else {
    it = stored.find("forward");
    if (it == stored.end())
      throw InputError(path, "schedules are stored for several methods (" + names +
                                 "): pass --method to pick one");
  }
  // Text from a file someone else wrote reaches the terminal only as a schedule: parsed and
  // printed again (control characters escaped), or refused.
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(it->second);
    (void)formats::scheduleFromJson(doc, path + ":" + tspass::scheduleFileFor(it->first));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "the schedule stored for " + it->first +
                               " is not a JSON document: " + firstLine(e.what()));
  }
  std::cout << doc.dump(1) << "\n";
  return kExitOk;
}

} // namespace xalloc::rewriter
