// The output side of xrewrite --cpp (cpp_output.h). Compiled without RTTI, like LLVM.
#include "cpp_output.h"

#include <clang/Tooling/ReplacementsYaml.h>
#include <llvm/Support/YAMLTraits.h>
#include <llvm/Support/raw_ostream.h>

#include "xalloc/error.h"
#include "xalloc/io.h"

namespace xalloc::rewriter {

using namespace clang;

// The edits as Clang's Replacements, one set per file, in which overlapping edits are an error.
// Insertions at one offset are first joined into one, the later-made first: each is made where
// the text it precedes starts, so it comes before what was inserted there earlier
// (`(a + b).contiguous()` gets its "(" after an inner call's wrapper opened at the same place).
llvm::Expected<std::map<std::string, tooling::Replacements>>
toReplacements(const std::vector<CppEdit>& edits) {
  std::map<std::pair<std::string, unsigned>, std::string> inserts;
  for (const auto& e : edits)
    if (e.length == 0)
      inserts[{e.file, e.offset}].insert(0, e.text);
  std::map<std::string, tooling::Replacements> out;
  for (const auto& [at, text] : inserts)
    if (auto err = out[at.first].add(tooling::Replacement(at.first, at.second, 0, text)))
      return err;
  for (const auto& e : edits)
    if (e.length > 0)
      if (auto err = out[e.file].add(tooling::Replacement(e.file, e.offset, e.length, e.text)))
        return err;
  return out;
}

void applyEdits(CppRewrite& out) {
  auto replacements = toReplacements(out.edits);
  if (!replacements)
    throw LogicError("overlapping C++ edits: " + llvm::toString(replacements.takeError()));
  for (const auto& [file, reps] : *replacements) {
    std::string text = readFile(file);
    out.before[file] = text;
    auto after = tooling::applyAllReplacements(text, reps);
    if (!after)
      throw LogicError(file + ": edits do not apply: " + llvm::toString(after.takeError()));
    out.after[file] = std::move(*after);
  }
}

std::string exportFixesYaml(const CppRewrite& r) {
  // clang-apply-replacements' format, written by Clang's own YAML traits (ReplacementsYaml.h).
  tooling::TranslationUnitReplacements doc;
  doc.MainSourceFile = r.edits.empty() ? std::string() : r.edits.front().file;
  auto replacements = toReplacements(r.edits);
  if (!replacements)
    throw LogicError("overlapping C++ edits: " + llvm::toString(replacements.takeError()));
  for (const auto& [file, reps] : *replacements)
    doc.Replacements.insert(doc.Replacements.end(), reps.begin(), reps.end());
  std::string yaml;
  llvm::raw_string_ostream os(yaml);
  llvm::yaml::Output out(os);
  out << doc;
  os.flush();
  return yaml;
}

} // namespace xalloc::rewriter
