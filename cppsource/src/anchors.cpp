// resolveAnchors: positions from debug info -> anchors (function, expression text, ordinal).
// Compiled without RTTI, like LLVM.
#include "xalloc/cppsource/anchors.h"

#include <algorithm>

#include "xalloc/cppsource/ast.h"

namespace xalloc::cppsource {

std::size_t resolveAnchors(const std::vector<formats::Anchor*>& anchors,
                           const std::vector<std::string>& files, const std::string& build_dir,
                           const std::vector<std::string>& fixed_args) {
  auto db = compilationDatabase(build_dir, fixed_args);
  std::vector<bool> done(anchors.size(), false);
  std::size_t resolved = 0;
  const OnParsed resolve = [&](ASTContext& ctx, const std::string& given) {
    Collector c(ctx,
                filesNamedBy(
                    anchors.size(),
                    [&](std::size_t i) -> const formats::Anchor& { return *anchors[i]; },
                    [&](std::size_t i) { return !done[i]; }),
                given);
    c.TraverseDecl(ctx.getTranslationUnitDecl());
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      formats::Anchor& a = *anchors[i];
      if (done[i])
        continue;
      for (const auto& [path, content] : c.contents_) {
        if (!c.names(a.file, path))
          continue;
        done[i] = true; // found in this file or not at all
        const Found f = findByPosition(c, path, content, a);
        if (!f.candidate)
          break;
        const auto& same = c.by_key_.at({path, *f.function, *f.text});
        a.function = *f.function;
        a.expr = *f.text;
        a.ordinal = std::count_if(same.begin(), same.end(),
                                  [&](const Candidate& o) { return o.begin < f.candidate->begin; });
        ++resolved;
        break;
      }
    }
  };
  for (const std::string& f : files)
    parseFile(*db, f, resolve);
  return resolved;
}

} // namespace xalloc::cppsource
