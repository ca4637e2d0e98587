// xprof: profile a TorchScript model, or (`xprof run`) a libtorch program, and write
// profile.json.
#include "xalloc/profiler/tool.h"
#include "xalloc/math_libraries.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <set>

#include "xalloc/cppsource/anchors.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/op_library.h"
#include "xalloc/profiler/cli.h"
#include "xalloc/profiler/launch.h"
#include "xalloc/runtime/async.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_warnings.h"

namespace xalloc::profiler {

int runXprof(XprofOptions o) {
  checkXprofOptions(o);
  o.profile.progress = !o.quiet;
  tspass::routeModelWarnings();
  for (const auto& lib : o.op_libraries)
    loadOpLibrary(lib);
  auto specs = tspass::specsFromFlags(o.input_shapes, o.input_dtypes, o.input_ranges, "xprof");
  if (!specs.empty())
    o.profile.inputs = std::move(specs);
  runtime::loadOps(); // models rewritten in the fast form use xalloc:: ops
  formats::Profile p = profileModel(o.profile);
  formats::emitDocument(o.output, {}, formats::toJson(p));
  if (!o.quiet && !o.output.empty() && o.output != "-")
    std::cerr << launch::summaryLine(p) << " -> " << o.output << "\n";
  // The reference BLAS makes every linear several times slower than any layout costs, and
  // makes transposed weights look worth converting; the user should know.
  if (const std::string note = launch::referenceBlasNote(p); !o.quiet && !note.empty())
    printNote(o.profile.model, note);
  if (const std::string note = launch::freezeNote(p); !o.quiet && !note.empty())
    printNote(o.profile.model, note);
  return kExitOk;
}

namespace {

// Anchors of a program's call sites from debug info carry a position only; Clang reads the
// expression there from the translation units that hold them.
void completeAnchors(formats::Profile& p, const std::string& build_dir, const std::string& base_dir,
                     bool quiet) {
  namespace fs = std::filesystem;
  const fs::path base = base_dir.empty() ? fs::current_path() : fs::path(base_dir);
  std::vector<formats::Anchor*> open;
  std::set<std::string> units;
  for (auto& op : p.ops)
    if (!op.anchor.file.empty() && op.anchor.expr.empty()) {
      open.push_back(&op.anchor);
      const std::string ext = std::filesystem::path(op.anchor.file).extension().string();
      if (ext != ".h" && ext != ".hpp" && ext != ".hh" && ext != ".hxx" && ext != ".inl")
        units.insert(fs::path(op.anchor.file).is_absolute()
                         ? op.anchor.file
                         : (base / op.anchor.file).lexically_normal().string());
    }
  const std::size_t n =
      cppsource::resolveAnchors(open, {units.begin(), units.end()}, build_dir, {});
  if (!quiet)
    std::fprintf(stderr, "xprof: %zu of %zu call sites matched to an expression by Clang\n", n,
                 open.size());
}

} // namespace

int runXprofRun(XprofRunOptions o) {
  checkOutputPath(o.output);
  auto p = profileProgram(o.run);
  if (!o.build_dir.empty())
    completeAnchors(p, o.build_dir, o.run.base_dir, o.quiet);
  formats::emitDocument(o.output, {}, formats::toJson(p));
  if (!o.quiet && !o.output.empty() && o.output != "-") {
    std::size_t noncontig = 0, located = 0;
    for (const auto& v : p.records)
      noncontig += !v.contiguous;
    for (const auto& op : p.ops)
      located += op.source.known();
    std::fprintf(stderr,
                 "xprof: %zu call sites (%zu in your sources), %zu tensor values (%zu "
                 "non-contiguous), %zu layouts measured, %zu idle windows -> %s\n",
                 p.ops.size(), located, p.records.size(), noncontig, p.conversion_cost_table.size(),
                 p.gpu_idle_events.size(), o.output.c_str());
  }
  return kExitOk;
}

} // namespace xalloc::profiler
