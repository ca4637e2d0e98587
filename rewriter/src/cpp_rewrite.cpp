// rewriteCpp: anchors -> Clang AST expressions -> text edits (cpp_output.cpp turns them into
// Clang's Replacements, the patched texts and clang-apply-replacements' YAML). Compiled without
// RTTI, like LLVM.
#include "xalloc/rewriter/cpp_rewrite.h"

#include "xalloc/cppsource/ast.h"

#include "cpp_output.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <clang/AST/ASTContext.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/raw_ostream.h>

#include "xalloc/error.h"
#include "xalloc/io.h"

namespace xalloc::rewriter {

namespace fs = std::filesystem;
using namespace clang;

namespace {

using namespace cppsource;

// Every reference to `var` inside `body`.
class UseCollector : public RecursiveASTVisitor<UseCollector> {
public:
  explicit UseCollector(const VarDecl* var) : var_(var) {}
  bool VisitDeclRefExpr(DeclRefExpr* e) {
    if (e->getDecl() == var_)
      uses.push_back(e);
    return true;
  }
  std::vector<const DeclRefExpr*> uses;

private:
  const VarDecl* var_;
};

class Rewriter {
public:
  Rewriter(const formats::Schedule& s, CppRewrite& out, bool async_calls)
      : s_(s), out_(out), async_calls_(async_calls) {}

  void run(ASTContext& ctx, const std::string& given) {
    // Files to look in: the main file, and any header that a decision still open names.
    Collector c(ctx,
                filesNamedBy(
                    s_.decisions.size(),
                    [&](std::size_t i) -> const formats::Anchor& { return s_.decisions[i].anchor; },
                    [&](std::size_t i) {
                      return !handled_.count(i) && s_.decisions[i].action != formats::Action::None;
                    }),
                given);
    collector_ = &c;
    c.TraverseDecl(ctx.getTranslationUnitDecl());
    for (std::size_t i = 0; i < s_.decisions.size(); ++i) {
      if (s_.decisions[i].action == formats::Action::None || handled_.count(i))
        continue;
      const std::string* target = nullptr;
      for (const auto& [path, text] : c.contents_)
        if (c.names(s_.decisions[i].anchor.file, path)) {
          target = &path;
          break;
        }
      if (!target)
        continue;
      handled_.insert(i); // a header included by several files is edited once
      current_ = i;
      const std::string& file = *target;
      const std::string& content = c.contents_.at(file);
      formats::Decision d = s_.decisions[i];
      if (d.region || d.target == formats::LayoutTarget::Blocked) {
        note(d.anchor, file,
             "skipped: a region decision (its ops rewritten together, weights re-laid as "
             "constants) is for a frozen TorchScript model",
             true);
        ++out_.skipped;
        continue;
      }
      if (const std::string other = disagreement(i); !other.empty()) {
        note(d.anchor, file,
             "skipped: `" + d.anchor.expr + "` is decided " + formats::actionName(d.action) +
                 " for one call and " + other +
                 " for another, and one edit changes every call; schedule it again with this "
                 "xsched",
             true);
        ++out_.skipped;
        continue;
      }
      const Candidate* pick =
          d.anchor.expr.empty() ? byPosition(c, file, content, d) : byText(c, file, content, d);
      if (!pick)
        continue;
      if (!edited_.insert({file, pick->begin, pick->end}).second) {
        note(d.anchor, file, "same site as an earlier decision: `" + d.anchor.expr + "`", false);
        ++out_.already;
        continue;
      }
      if (pick->macro) {
        note(d.anchor, file, "skipped: `" + d.anchor.expr + "` is written by a macro", true);
        ++out_.skipped;
        continue;
      }
      if (pick->dependent) {
        note(d.anchor, file, "skipped: `" + d.anchor.expr + "` is inside a template", true);
        ++out_.skipped;
        continue;
      }
      if (const std::string why = rawWriteOf(ctx, pick->function, pick->expr); !why.empty()) {
        note(d.anchor, file,
             "skipped: " + why + "; a conversion here would move that write to a copy, or " +
                 "leave a stale copy for what reads it after",
             true);
        ++out_.skipped;
        continue;
      }
      // A decision's edits are kept together or not at all: when they overlap an earlier
      // decision's (Clang's Replacements refuse it), the decision is undone and reported.
      const Snapshot before = snapshot();
      if (d.action == formats::Action::Remove)
        remove(ctx, *pick, d, file);
      else if (d.action == formats::Action::Async && async_calls_)
        convertAsync(ctx, *pick, d, file, content);
      else
        convert(ctx, *pick, d, file, content);
      if (auto err = toReplacements(out_.edits).takeError()) {
        const std::string why = llvm::toString(std::move(err));
        restore(before);
        note(d.anchor, file,
             "skipped: the edit for `" + d.anchor.expr + "` overlaps an earlier one (" + why + ")",
             true);
        ++out_.skipped;
      }
    }
  }

  // Another decision on the same expression (another call stack of a program reaching it) with
  // another action: "" when there is none. xsched makes them agree; a schedule written by hand or
  // by an older xsched may not, and no single edit can honour both. The expression's other
  // decisions are then done with: it is reported once.
  std::string disagreement(std::size_t i) {
    const formats::Decision& d = s_.decisions[i];
    std::string other;
    for (const auto& o : s_.decisions)
      if (o.action != d.action && formats::sameExpression(o, d))
        other = formats::actionName(o.action);
    if (!other.empty())
      for (std::size_t j = 0; j < s_.decisions.size(); ++j)
        if (formats::sameExpression(s_.decisions[j], d))
          handled_.insert(j);
    return other;
  }

  // The expression an anchor names (cppsource::findByText), or a note saying why none.
  const Candidate* byText(const Collector& c, const std::string& file, const std::string& content,
                          const formats::Decision& d) {
    const TextMatch m = findByText(c, file, content, d.anchor);
    if (m.candidate)
      return m.candidate;
    if (m.matches == 0) {
      note(d.anchor, file,
           "not found: no `" + d.anchor.expr + "` of type at::Tensor in " + d.anchor.function,
           d.action != formats::Action::Remove);
      ++out_.not_found;
      return nullptr;
    }
    note(d.anchor, file,
         "ambiguous: " + std::to_string(m.matches) + " `" + d.anchor.expr + "` in " +
             d.anchor.function + " and ordinal " + std::to_string(d.anchor.ordinal) +
             " does not pick one",
         true);
    ++out_.skipped;
    return nullptr;
  }

  // An anchor with a position only (`xprof run` without -p): fills in the expression's text.
  const Candidate* byPosition(const Collector& c, const std::string& file,
                              const std::string& content, formats::Decision& d) {
    const Found f = findByPosition(c, file, content, d.anchor);
    if (f.candidate) {
      d.anchor.expr = *f.text;
      return f.candidate;
    }
    note(d.anchor, file,
         "not found: no call of type at::Tensor at " + std::to_string(d.anchor.line) + ":" +
             std::to_string(d.anchor.col) +
             (d.anchor.function.empty() ? std::string() : " in " + d.anchor.function),
         d.action != formats::Action::Remove);
    ++out_.not_found;
    return nullptr;
  }

  const std::set<std::size_t>& handled() const { return handled_; }

private:
  // Reported at the anchor's position in `file`.
  void note(const formats::Anchor& a, const std::string& file, const std::string& msg,
            bool warning) {
    out_.notes.push_back(
        {file + ":" + std::to_string(a.line) + ":" + std::to_string(a.col), msg, warning});
  }

  void edit(const std::string& file, unsigned offset, unsigned length, std::string text) {
    out_.edits.push_back({file, offset, length, std::move(text), current_});
  }

  struct Snapshot {
    std::size_t edits, notes, applied, already, skipped;
  };
  Snapshot snapshot() const {
    return {out_.edits.size(), out_.notes.size(), out_.applied, out_.already, out_.skipped};
  }
  void restore(const Snapshot& s) {
    out_.edits.resize(s.edits);
    out_.notes.resize(s.notes);
    out_.applied = s.applied;
    out_.already = s.already;
    out_.skipped = s.skipped;
  }

  // Already converted by the runtime: the expression is the argument of contiguousFast(...) or
  // contiguousAsync(...).
  bool inRuntimeCall(const Expr* e, const formats::Decision& d, const std::string& file) {
    if (const auto* call = explicitParent(e).get<CallExpr>())
      if (const FunctionDecl* callee = call->getDirectCallee()) {
        const std::string name = callee->getNameAsString();
        if (name == "contiguousFast" || name == "contiguousAsync") {
          note(d.anchor, file,
               "already converted: `" + d.anchor.expr + "` is converted by " + name + "()", false);
          ++out_.already;
          return true;
        }
      }
    return false;
  }

  // A conversion to another memory format than the decision's, already written there.
  void otherFormat(const formats::Decision& d, const std::string& file,
                   const std::optional<formats::LayoutTarget>& there) {
    note(d.anchor, file,
         "skipped: `" + d.anchor.expr + "` is converted to " +
             (there ? formats::toString(*there) : "a memory format computed at run time") +
             " here already, not to " + formats::toString(d.target),
         true);
    ++out_.skipped;
  }

  // `why`: the reason an async decision is written as sync, for its note.
  void convert(ASTContext& ctx, const Candidate& c, const formats::Decision& d,
               const std::string& file, const std::string& content, const std::string& why = "") {
    using formats::LayoutTarget;
    // Already converted: the expression is the object of a `.contiguous(...)` call.
    const Expr* e = c.expr;
    if (d.target == LayoutTarget::Contiguous && inRuntimeCall(e, d, file))
      return;
    for (const Expr* p = up(e).get<Expr>(); p; p = up(p).get<Expr>()) {
      if (isa<ImplicitCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ParenExpr>(p))
        continue;
      if (const auto* member = dyn_cast<MemberExpr>(p))
        if (member->getMemberDecl()->getNameAsString() == "contiguous") {
          const auto there = conversionTarget(dyn_cast_or_null<Expr>(up(member).get<Expr>()));
          if (there != d.target)
            return otherFormat(d, file, there);
          note(d.anchor, file,
               "already converted: `" + d.anchor.expr + conversionText(d.target) + "`", false);
          ++out_.already;
          return;
        }
      break;
    }
    if (const auto there = conversionTarget(e); there || isConversionCall(e)) {
      if (there != d.target)
        return otherFormat(d, file, there);
      note(d.anchor, file,
           "already " + std::string(formats::toString(d.target)) + ": `" + d.anchor.expr +
               "` is a conversion",
           false);
      ++out_.already;
      return;
    }
    const std::string suffix = conversionText(d.target);
    // Already parenthesised, `(a + b)`: the conversion goes after the closing parenthesis.
    const ParenExpr* paren = nullptr;
    for (const Expr* p = up(e).get<Expr>(); p; p = up(p).get<Expr>()) {
      if (isa<ImplicitCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr>(p))
        continue;
      paren = dyn_cast<ParenExpr>(p);
      break;
    }
    SourceManager& sm = ctx.getSourceManager();
    if (async_calls_ && d.target == LayoutTarget::Contiguous) {
      // The fast form: the runtime's kernel, `xalloc::runtime::contiguousFast(EXPR)`; an
      // existing parenthesis, `(a + b)`, becomes the call's. (It makes row-major tensors only:
      // other memory formats are written as ATen's conversion.)
      if (paren && !paren->getLParen().isMacroID() && !paren->getRParen().isMacroID()) {
        edit(file, sm.getFileOffset(paren->getLParen()), 0, "xalloc::runtime::contiguousFast");
      } else {
        edit(file, c.begin, 0, "xalloc::runtime::contiguousFast(");
        edit(file, c.end, 0, ")");
      }
      addInclude(file, content);
    } else if (isPostfix(e)) {
      edit(file, c.end, 0, suffix);
    } else if (paren && !paren->getRParen().isMacroID()) {
      edit(file, sm.getFileOffset(paren->getRParen()) + 1, 0, suffix);
    } else {
      edit(file, c.begin, 0, "(");
      edit(file, c.end, 0, ")" + suffix);
    }
    const bool fast = async_calls_ && d.target == LayoutTarget::Contiguous;
    note(d.anchor, file,
         std::string(d.action == formats::Action::Async ? "async (as sync)" : "sync") +
             ": converted `" + d.anchor.expr + "`" +
             (d.target == LayoutTarget::Contiguous
                  ? ""
                  : " to " + std::string(formats::toString(d.target))) +
             (fast ? " with contiguousFast" : "") + why,
         false);
    ++out_.applied;
  }

  // Walks up from `e` through implicit nodes; returns the first explicit parent node.
  DynTypedNode explicitParent(const Expr* e) const {
    DynTypedNode node = up(e);
    while (const auto* p = node.get<Expr>()) {
      if (!isa<ImplicitCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ExprWithCleanups>(
              p) &&
          !(isa<CXXConstructExpr>(p) && cast<CXXConstructExpr>(p)->getNumArgs() == 1))
        break;
      node = up(p);
    }
    return node;
  }

  // The node above `s` in the function being edited (ParentMapContext would map the whole
  // translation unit, libtorch's headers included: a second or more per file).
  DynTypedNode up(const Stmt* s) const {
    auto it = collector_->parents_.find(s);
    return it == collector_->parents_.end() ? DynTypedNode() : it->second;
  }

  void convertAsync(ASTContext& ctx, const Candidate& c, const formats::Decision& d,
                    const std::string& file, const std::string& content) {
    if (d.target != formats::LayoutTarget::Contiguous)
      return convert(ctx, c, d, file, content,
                     " (the runtime's async conversion makes row-major tensors only)");
    if (inRuntimeCall(c.expr, d, file))
      return;
    const DynTypedNode parent = explicitParent(c.expr);
    const auto* var = parent.get<VarDecl>();
    // Where no handle can be held or waited on, the conversion is still worth its saving: it is
    // written as sync, as the portable form writes it.
    if (!var || !var->getType()->getContainedAutoType() || var->getType()->isReferenceType())
      return convert(ctx, c, d, file, content, " (no `auto v = ...;` to hold an async handle)");
    const auto* fn = dyn_cast_or_null<FunctionDecl>(var->getParentFunctionOrMethod());
    UseCollector uses(var);
    if (fn && fn->getBody())
      uses.TraverseStmt(fn->getBody());
    SourceManager& sm = ctx.getSourceManager();
    for (const DeclRefExpr* u : uses.uses)
      if (u->getBeginLoc().isMacroID())
        return convert(ctx, c, d, file, content,
                       " (a use of `" + var->getNameAsString() + "` is in a macro: no wait there)");
    edit(file, c.begin, 0, "xalloc::runtime::contiguousAsync(");
    edit(file, c.end, 0, ")");
    for (const DeclRefExpr* u : uses.uses) {
      const SourceLocation end =
          Lexer::getLocForEndOfToken(u->getEndLoc(), 0, sm, ctx.getLangOpts());
      edit(file, sm.getFileOffset(end), 0, ".wait()");
    }
    addInclude(file, content);
    note(d.anchor, file,
         "async: `" + d.anchor.expr + "` converts on a side worker; " +
             std::to_string(uses.uses.size()) + " use(s) of `" + var->getNameAsString() +
             "` wait for it",
         false);
    ++out_.applied;
  }

  // The runtime's header, once per file, after the last #include at the top.
  void addInclude(const std::string& file, const std::string& content) {
    if (content.find("xalloc/runtime/async.h") != std::string::npos || include_added_.count(file))
      return;
    std::size_t at = 0, pos = 0;
    while ((pos = content.find("#include", pos)) != std::string::npos) {
      const std::size_t eol = content.find('\n', pos);
      at = eol == std::string::npos ? content.size() : eol + 1;
      pos = at;
    }
    edit(file, static_cast<unsigned>(at), 0, "#include \"xalloc/runtime/async.h\"\n");
    include_added_.insert(file);
  }

  void remove(ASTContext& ctx, const Candidate& c, const formats::Decision& d,
              const std::string& file) {
    const auto* call = dyn_cast<CXXMemberCallExpr>(semantic(c.expr));
    if (!call || !isContiguousCall(call)) {
      note(d.anchor, file, "skipped: `" + d.anchor.expr + "` is not a plain .contiguous() call",
           true);
      ++out_.skipped;
      return;
    }
    const Expr* object = call->getImplicitObjectArgument();
    SourceManager& sm = ctx.getSourceManager();
    const SourceLocation obj_end =
        Lexer::getLocForEndOfToken(sm.getFileLoc(object->getEndLoc()), 0, sm, ctx.getLangOpts());
    const unsigned from = sm.getFileOffset(obj_end);
    edit(file, from, c.end - from, "");
    note(d.anchor, file, "remove: dropped `.contiguous()` from `" + d.anchor.expr + "`", false);
    ++out_.applied;
  }

  const formats::Schedule& s_;
  const Collector* collector_ = nullptr; // of the translation unit being edited
  CppRewrite& out_;
  bool async_calls_;
  std::set<std::size_t> handled_;
  std::set<std::tuple<std::string, unsigned, unsigned>> edited_;
  std::set<std::string> include_added_;
  std::size_t current_ = 0; // the decision being written
};

} // namespace

CppRewrite rewriteCpp(const formats::Schedule& schedule, const std::vector<std::string>& files,
                      const std::string& build_dir, const std::vector<std::string>& fixed_args,
                      bool async_calls) {
  CppRewrite out;
  auto db = compilationDatabase(build_dir, fixed_args);
  Rewriter rewriter(schedule, out, async_calls);
  const OnParsed run = [&](ASTContext& ctx, const std::string& given) {
    rewriter.run(ctx, given);
  };
  for (const std::string& f : files)
    parseFile(*db, f, run);
  out.matched = rewriter.handled().size();
  // Decisions for files no parse reached (not given, nor included by a file given): a pre-commit
  // run on some files leaves the others' alone, but says so, per file, and counts them.
  std::map<std::string, std::size_t> unreached;
  for (std::size_t i = 0; i < schedule.decisions.size(); ++i)
    if (schedule.decisions[i].action != formats::Action::None &&
        !schedule.decisions[i].anchor.file.empty() && !rewriter.handled().count(i))
      ++unreached[schedule.decisions[i].anchor.file];
  for (const auto& [file, n] : unreached) {
    out.notes.push_back({file,
                         std::to_string(n) + (n == 1 ? " decision" : " decisions") +
                             " not applied: no file given is this one or includes it",
                         false});
    out.unreached += n;
  }
  // xsched leaves a site without an anchor `none` (libtorch made the value, not an expression of
  // the program's); a schedule edited by hand can still ask for one: say so, never drop it.
  for (const auto& d : schedule.decisions) {
    if (d.action == formats::Action::None || !d.anchor.file.empty())
      continue;
    std::string location = "<schedule>", kind = "op " + std::to_string(d.producer);
    if (const formats::Op* op = schedule.findOp(d.producer)) {
      kind = op->kind;
      if (op->source.known())
        location = op->source.location();
    }
    out.notes.push_back({location,
                         "skipped: " + std::string(formats::actionName(d.action)) + " of " +
                             d.value_name + " (made by " + kind +
                             " inside libtorch) has no source anchor: no expression to edit",
                         true});
    ++out.skipped;
  }
  applyEdits(out);
  return out;
}

} // namespace xalloc::rewriter
