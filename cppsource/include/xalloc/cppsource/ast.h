// The Clang side of xrewrite --cpp and xprof run -p: every expression of type at::Tensor in the
// functions of the files a schedule names, and the searches that match anchors to them (by
// text, by position). Included only by the libraries that are compiled with Clang's headers
// (this one and the rewriter's C++ path), without RTTI like LLVM; the rest of x-allocator uses
// xalloc/cppsource/anchors.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/CompilationDatabase.h>

#include "xalloc/formats/anchor_match.h"
#include "xalloc/formats/enums.h"
#include "xalloc/formats/types.h"

namespace xalloc::cppsource {

using namespace clang;

/// Whitespace-normalised source text: one space only between two identifier characters.
std::string normalise(const std::string& text);
/// An absolute, canonical path (as given when that fails).
std::string canonical(const std::string& path);
/// The anchor's file names this source: the same path, or a suffix of it ("samples/x.cpp"; an
/// anchor's leading "./" and "../" are not part of the suffix).
bool sameFile(const std::string& anchor_file, const std::string& source);
/// The absolute path Clang reached a file by, without "." and ".." but with its links kept
/// (an include through a symbolic link keeps the link's name; debug info, and so the anchors of
/// `xprof run`, name the file that way).
std::string spelledPath(const SourceManager& sm, FileID id);
/// at::Tensor or at::TensorBase (also through torch:: aliases and references).
bool isTensorType(QualType t);
/// The semantic expression beneath implicit wrappers that share its source range.
const Expr* semantic(const Expr* e);
/// A plain `.contiguous()` call (no explicit memory format).
bool isContiguousCall(const Expr* e);
/// The memory format a `.contiguous(...)` call makes: row-major with no argument or
/// MemoryFormat::Contiguous, channels-last with ChannelsLast(3d); nullopt for anything else (a
/// format computed at run time, or not a conversion).
std::optional<formats::LayoutTarget> conversionTarget(const Expr* e);
/// Any `.contiguous(...)` call, whatever its argument.
bool isConversionCall(const Expr* e);
/// What a rewrite appends for a target: `.contiguous()`, or with libtorch's memory format.
std::string conversionText(formats::LayoutTarget t);
/// Postfix expressions take `.contiguous()` without parentheses.
bool isPostfix(const Expr* e);
/// What a call is called, in aten's words where it is an operator: `a + b` -> "add".
std::string calleeName(const Expr* e);
/// Whether a call by that name runs the op: "transpose" runs aten::transpose.
bool runsOp(const std::string& callee, const std::string& op);
using formats::sameFunction; // "forward" matches "Model::forward" (anchor_match.h)

struct Candidate {
  const Expr* expr;
  std::string file;    // canonical path of the file the expression is written in
  unsigned begin, end; // file offsets of the expression's text
  bool macro;
  bool dependent;     // inside a template: the type is not known
  bool call;          // a call (function, method or operator): what a profiled op site can be
  std::string callee; // the called function's name; an operator's aten name ("add" for +)
  const FunctionDecl* function = nullptr; // the function the expression is in
};

/// Why converting the tensor `e` computes in `fn` (or removing its conversion) could change what
/// the program does: the value, a view of it, or what it is a view of is written somewhere the
/// profiler cannot see (an accessor, data_ptr(), an in-place call, an out= or non-const
/// reference argument, a function of the program's own that does, or one whose body is not in
/// the file); "" when the function shows none. The conversion would move the write to a copy,
/// or leave a stale copy for later reads.
std::string rawWriteOf(ASTContext& ctx, const FunctionDecl* fn, const Expr* e);

// Collects every expression of type at::Tensor, per enclosing function, in the files the
// schedule names: the main file and the user headers it includes (never system headers).
// `wanted(canonical, spelled)` says whether a header is one of them; a file is known by its
// canonical path, and also by each name it was reached by (see spelledPath).
class Collector : public RecursiveASTVisitor<Collector> {
public:
  using Wanted = std::function<bool(const std::string& canonical, const std::string& spelled)>;
  /// `given`: the main file's name as the user gave it (absolute), another name it is known by.
  Collector(ASTContext& ctx, Wanted wanted, std::string given)
      : ctx_(ctx), sm_(ctx.getSourceManager()), wanted_(std::move(wanted)),
        given_(std::move(given)) {}

  /// Whether an anchor's file names `file` (a canonical path collected from), by that path or
  /// by another name the file was reached by.
  bool names(const std::string& anchor_file, const std::string& file) const {
    if (sameFile(anchor_file, file))
      return true;
    auto it = aliases_.find(file);
    if (it != aliases_.end())
      for (const auto& name : it->second)
        if (sameFile(anchor_file, name))
          return true;
    return false;
  }
  /// The translation unit's own declarations: those a precompiled preamble holds are not read
  /// in (the system headers' functions are never a target; reading them all back would cost
  /// what the preamble saved).
  bool TraverseTranslationUnitDecl(TranslationUnitDecl* tu) {
    for (Decl* d : tu->noload_decls())
      if (!TraverseDecl(d))
        return false;
    return true;
  }
  bool TraverseFunctionDecl(FunctionDecl* f) { return traverseFunction(f); }
  bool TraverseCXXMethodDecl(CXXMethodDecl* f) { return traverseFunction(f); }
  bool TraverseCXXConstructorDecl(CXXConstructorDecl* f) { return traverseFunction(f); }

  bool VisitExpr(Expr* e) {
    if (!function_ || e != semantic(e))
      return true;
    const SourceRange range = e->getSourceRange();
    if (range.isInvalid())
      return true;
    const bool macro = range.getBegin().isMacroID() || range.getEnd().isMacroID();
    const SourceLocation begin = sm_.getFileLoc(range.getBegin());
    const std::string* file = target(sm_.getFileID(begin));
    if (!file)
      return true;
    const bool dependent = e->isTypeDependent();
    if (!dependent && !isTensorType(e->getType()))
      return true;
    // A macro's expansion range covers its whole invocation, `TRANSPOSED(a)`.
    const CharSourceRange chars = sm_.getExpansionRange(range);
    const std::string text = normalise(Lexer::getSourceText(chars, sm_, ctx_.getLangOpts()).str());
    if (text.empty())
      return true;
    const unsigned b = sm_.getFileOffset(chars.getBegin());
    const unsigned end = chars.isTokenRange() ? sm_.getFileOffset(Lexer::getLocForEndOfToken(
                                                    chars.getEnd(), 0, sm_, ctx_.getLangOpts()))
                                              : sm_.getFileOffset(chars.getEnd());
    auto& list = by_key_[{*file, function_name_, text}];
    for (const auto& c : list)
      if (c.begin == b && c.end == end)
        return true; // the same text twice (a wrapper we did not recognise)
    list.push_back(
        {e, *file, b, end, macro, dependent, isa<CallExpr>(e), calleeName(e), function_});
    return true;
  }

  /// (file, function, text) -> the expressions, in source order per key.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<Candidate>> by_key_;
  /// Text of every file collected from, by canonical path.
  std::map<std::string, std::string> contents_;
  /// The parent of every statement in the functions collected from (an initializer's parent is
  /// its variable).
  std::unordered_map<const Stmt*, DynTypedNode> parents_;

private:
  // The canonical path of a file to collect from, or nullptr.
  const std::string* target(FileID id) {
    auto it = targets_.find(id);
    if (it != targets_.end())
      return it->second ? &*it->second : nullptr;
    std::optional<std::string> path;
    if (const FileEntry* fe = sm_.getFileEntryForID(id)) {
      const std::string real = canonical(fe->getName().str()), spelled = spelledPath(sm_, id);
      if (id == sm_.getMainFileID() ||
          (!sm_.isInSystemHeader(sm_.getLocForStartOfFile(id)) && wanted_(real, spelled))) {
        path = real;
        contents_.emplace(real, sm_.getBufferData(id).str());
        auto& names = aliases_[real];
        names.insert(spelled);
        if (id == sm_.getMainFileID())
          names.insert(given_);
      }
    }
    return targets_.emplace(id, std::move(path)).first->second ? &*targets_[id] : nullptr;
  }

  template <typename F> bool traverseFunction(F* f) {
    if (!f->hasBody() || !target(sm_.getFileID(sm_.getFileLoc(f->getLocation()))))
      return true;
    const FunctionDecl* saved = function_;
    const std::string saved_name = function_name_;
    function_ = f;
    function_name_ = f->getQualifiedNameAsString();
    mapParents(f->getBody());
    RecursiveASTVisitor::TraverseStmt(f->getBody());
    function_ = saved;
    function_name_ = saved_name;
    return true;
  }
  void mapParents(const Stmt* s) {
    for (const Stmt* child : s->children())
      if (child) {
        parents_[child] = DynTypedNode::create(*s);
        mapParents(child);
      }
    if (const auto* decls = dyn_cast<DeclStmt>(s))
      for (const Decl* d : decls->decls())
        if (const auto* var = dyn_cast<VarDecl>(d); var && var->getInit())
          parents_[var->getInit()] = DynTypedNode::create(*var);
  }

  ASTContext& ctx_;
  SourceManager& sm_;
  Wanted wanted_;
  std::string given_;
  std::map<FileID, std::optional<std::string>> targets_;
  std::map<std::string, std::set<std::string>> aliases_;
  const FunctionDecl* function_ = nullptr;
  std::string function_name_;
};

// The smallest call of type at::Tensor whose text covers an anchor's line:col, preferably in
// the anchor's function: compilers put a call's column on its name, its `(` or its `)`, and
// each lies inside that call and outside every smaller one. Where none covers it (a function
// template's instantiation: the statement's column), the one call on the line running the
// anchor's op in its function.
struct Found {
  const Candidate* candidate = nullptr;
  const std::string* function = nullptr;
  const std::string* text = nullptr;
};

/// The file offset of a 1-based line and column.
std::size_t offsetOf(const std::string& content, std::int64_t line, std::int64_t col);

/// The smallest call of type at::Tensor whose text covers the anchor's line:col (see the .cpp).
Found findByPosition(const Collector& c, const std::string& file, const std::string& content,
                     const formats::Anchor& a);

/// The expression an anchor with text names: (file, function, text) matched, then the one
/// tie-break (formats::pickAmongMatches: the ordinal, else a unique line hint). `matches` is how
/// many (file, function, text) matched: 0 is not found, more with no candidate is ambiguous.
struct TextMatch {
  const Candidate* candidate = nullptr;
  std::size_t matches = 0;
};
TextMatch findByText(const Collector& c, const std::string& file, const std::string& content,
                     const formats::Anchor& a);

/// The Collector's file filter for a set of anchors: a file is wanted when an anchor still open
/// (`open(i)`) names it by its real or its spelled path.
std::function<bool(const std::string& real, const std::string& spelled)>
filesNamedBy(std::size_t count, std::function<const formats::Anchor&(std::size_t)> anchor,
             std::function<bool(std::size_t)> open);

/// What to do with each parsed translation unit; `given` is the file's name as the user gave
/// it, made absolute before Clang changes to the compile command's folder.
using OnParsed = std::function<void(ASTContext&, const std::string& given)>;

/// `fixed_args` (flags after `--`) when given, or else `build_dir`'s compile_commands.json.
/// Throws InputError when the folder has none.
std::unique_ptr<tooling::CompilationDatabase>
compilationDatabase(const std::string& build_dir, const std::vector<std::string>& fixed_args);

/// Parses `f` with its compile command and calls `on_parsed` with the AST. Throws InputError
/// with Clang's first diagnostic when it does not parse.
void parseFile(const tooling::CompilationDatabase& db, const std::string& f,
               const OnParsed& on_parsed);

} // namespace xalloc::cppsource
