// `xrewrite --cpp` (cli.h): a schedule written into C++ sources with Clang, each edit kept to the
// folders xrewrite may patch, shown as a unified diff relative to the repository or written in
// place; and the form a schedule is written in. No libtorch: xrewrite's front runs this itself.
#include "xalloc/rewriter/cli.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/rewriter/cpp_rewrite.h"
#include "xalloc/rewriter/text_diff.h"
#include "xalloc/tool.h"

namespace xalloc::rewriter {

namespace {

// Paths in diffs are relative to the repository (git's top level, else the working directory),
// so `git apply` takes the patch.
std::string repoRelative(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path root = fs::current_path();
  if (std::FILE* p = ::popen("git rev-parse --show-toplevel 2>/dev/null", "r")) {
    char buf[4096] = {};
    if (std::fgets(buf, sizeof buf, p)) {
      std::string top(buf);
      while (!top.empty() && (top.back() == '\n' || top.back() == '\r'))
        top.pop_back();
      if (!top.empty())
        root = top;
    }
    ::pclose(p);
  }
  std::error_code ec;
  const fs::path rel = fs::relative(path, root, ec);
  return ec || rel.empty() || rel.string().rfind("..", 0) == 0 ? path : rel.string();
}

namespace fs = std::filesystem;

// The folders whose files may be patched: the current one, the sources' own, and --root's.
std::vector<fs::path> boundary(const XrewriteOptions& o) {
  std::vector<fs::path> roots;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(fs::absolute(p), ec);
    roots.push_back(ec ? fs::absolute(p).lexically_normal() : c);
  };
  add(fs::current_path());
  for (const auto& f : o.cpp_files)
    add(fs::absolute(f).parent_path());
  for (const auto& r : o.roots) {
    if (!fs::is_directory(r))
      throw InputError(r, "--root: not a folder");
    add(r);
  }
  return roots;
}

bool inside(const fs::path& file, const std::vector<fs::path>& roots) {
  std::error_code ec;
  const fs::path f = fs::weakly_canonical(file, ec);
  for (const auto& root : roots) {
    auto [r, p] = std::mismatch(root.begin(), root.end(), f.begin(), f.end());
    if (r == root.end())
      return true;
  }
  return false;
}

// Edits of files outside the boundary are dropped, each file said once.
void keepInside(CppRewrite& r, const std::vector<fs::path>& roots) {
  std::set<std::string> outside;
  for (const auto& [file, text] : r.after)
    if (!inside(file, roots))
      outside.insert(file);
  if (outside.empty())
    return;
  std::set<std::size_t> dropped; // decisions, not edits: one may make several
  r.edits.erase(std::remove_if(r.edits.begin(), r.edits.end(),
                               [&](const CppEdit& e) {
                                 const bool out = outside.count(e.file) > 0;
                                 if (out)
                                   dropped.insert(e.decision);
                                 return out;
                               }),
                r.edits.end());
  for (const auto& file : outside) {
    r.after.erase(file);
    r.before.erase(file);
    r.notes.push_back({file,
                       "skipped: outside the folders xrewrite patches (the current folder and "
                       "the sources' folders); --root " +
                           fs::path(file).parent_path().string() + " to patch it",
                       true});
  }
  r.applied -= std::min(r.applied, dropped.size());
  r.skipped += dropped.size();
}

int rewriteCppSources(const XrewriteOptions& o, const formats::Schedule& schedule) {
  const auto roots = boundary(o);
  CppRewrite r = rewriteCpp(schedule, o.cpp_files, o.build_dir, o.compiler_args,
                            o.form == formats::RewriteForm::Fast);
  keepInside(r, roots);
  if (r.matched == 0) {
    // Nothing for these files. Fine when the schedule's files exist but were not given (a
    // pre-commit run on other files); an error when the schedule names none that exists.
    std::set<std::string> named;
    bool any_exists = false;
    for (const auto& d : schedule.decisions)
      if (d.action != formats::Action::None && !d.anchor.file.empty()) {
        named.insert(d.anchor.file);
        any_exists = any_exists || isRegularFile(d.anchor.file);
      }
    if (!named.empty() && !any_exists)
      throw InputError(o.schedule.empty() ? "<stdin>" : o.schedule,
                       "the schedule is for other sources: it names " + *named.begin() +
                           (named.size() > 1 ? " and " + std::to_string(named.size() - 1) + " more"
                                             : std::string()) +
                           ", none of which is among the files given or exists here");
  }
  for (const auto& n : r.notes) {
    if (n.warning)
      printWarning(n.location, n.message);
    else if (!o.quiet)
      printNote(n.location, n.message);
  }
  if (!o.quiet)
    std::cerr << "xrewrite: " << r.applied << " applied, " << r.already << " already applied, "
              << r.not_found << " not found, " << r.skipped << " skipped"
              << (r.unreached ? ", " + std::to_string(r.unreached) + " in files not parsed" : "")
              << "\n";
  if (!o.export_fixes.empty())
    writeFileAtomic(o.export_fixes, exportFixesYaml(r));
  if (o.check)
    return r.after.empty() ? kExitOk : kExitChangesNeeded;
  if (o.in_place) {
    for (const auto& [file, text] : r.after)
      writeFileAtomic(file, text);
    return kExitOk;
  }
  if (o.export_fixes.empty() || o.diff)
    for (const auto& [file, text] : r.after) {
      const std::string rel = repoRelative(file);
      const bool abs = !rel.empty() && rel[0] == '/';
      std::cout << unifiedDiff(r.before.at(file), text, (abs ? "" : "a/") + rel,
                               (abs ? "" : "b/") + rel);
    }
  return kExitOk;
}

} // namespace

// The form to write: --form, else the one the schedule was planned for, else portable. A plan
// for the fast form written in the portable one runs its async conversions on the critical path
// and pays for fresh outputs the plan did not count: said once, as a warning.
XrewriteOptions withForm(XrewriteOptions o, const formats::Schedule& s, const std::string& name) {
  using formats::RewriteForm;
  if (!o.form)
    o.form = s.summary.form.value_or(RewriteForm::Portable);
  const std::int64_t edits = s.count(formats::Action::Sync) + s.count(formats::Action::Async);
  if (*o.form == RewriteForm::Portable && s.summary.form == RewriteForm::Fast && edits > 0)
    printWarning(name, "the schedule was planned for the fast form (xsched --form fast); written "
                       "portable, its conversions pay for fresh outputs" +
                           std::string(s.count(formats::Action::Async) > 0
                                           ? " and its async ones run on the critical path"
                                           : "") +
                           ", which the plan did not count: plan with xsched --form portable");
  return o;
}

int runXrewriteCpp(const XrewriteOptions& o) {
  if (!o.model.empty())
    throw InputError("xrewrite", "give either a TorchScript model or --cpp sources, not both");
  if (o.in_place && o.check)
    throw InputError("xrewrite", "--in-place and --check exclude each other");
  if (!o.output.empty())
    throw InputError(o.output, "-o writes a TorchScript model; C++ sources are patched with "
                               "--in-place, or shown as a diff on standard output");
  for (const auto& f : o.cpp_files)
    if (!o.export_fixes.empty() && samePath(o.export_fixes, f))
      throw InputError(o.export_fixes, "--export-fixes names a source to patch; write the "
                                       "fixes to another file");
  checkOutputPath(o.export_fixes); // before Clang's parses, not after
  bool from_stdin = inputIsStdin("xrewrite", o.schedule, "--schedule schedule.json");
  auto set = formats::DocumentSet::read(from_stdin ? "-" : o.schedule);
  const formats::Schedule schedule =
      formats::scheduleFromJson(set.require(formats::DocKind::Schedule), set.name());
  return rewriteCppSources(withForm(o, schedule, set.name()), schedule);
}

} // namespace xalloc::rewriter
