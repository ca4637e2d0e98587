// The Clang side shared by xrewrite --cpp and xprof run -p (xalloc/cppsource/ast.h). Compiled
// without RTTI.
#include "xalloc/cppsource/ast.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/Path.h>

namespace xalloc::cppsource {

namespace fs = std::filesystem;

std::string normalise(const std::string& text) {
  return formats::normaliseExpression(text);
}

std::string canonical(const std::string& path) {
  std::error_code ec;
  auto p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? path : p.string();
}

// The anchor's file names this source: the same path, or a suffix of it ("samples/x.cpp").
bool sameFile(const std::string& anchor_file, const std::string& source) {
  if (anchor_file.empty())
    return false;
  if (canonical(anchor_file) == source)
    return true;
  // "../src/x.cpp", written relative to a folder other than the current one: "src/x.cpp".
  std::string_view tail = anchor_file;
  while (tail.rfind("./", 0) == 0 || tail.rfind("../", 0) == 0)
    tail.remove_prefix(tail[1] == '/' ? 2 : 3);
  return !tail.empty() && tail[0] != '/' && source.size() > tail.size() &&
         source.compare(source.size() - tail.size(), tail.size(), tail) == 0 &&
         source[source.size() - tail.size() - 1] == '/';
}

std::string spelledPath(const SourceManager& sm, FileID id) {
  const auto ref = sm.getFileEntryRefForID(id);
  if (!ref)
    return {};
  // Relative names are relative to the compile command's folder: the file manager's.
  llvm::SmallString<256> path(ref->getName());
  sm.getFileManager().makeAbsolutePath(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return path.str().str();
}

bool isTensorType(QualType t) {
  t = t.getNonReferenceType().getCanonicalType();
  const auto* rd = t->getAsCXXRecordDecl();
  if (!rd)
    return false;
  const std::string name = rd->getQualifiedNameAsString();
  return name == "at::Tensor" || name == "at::TensorBase";
}

// Implicit wrappers share their child's source range; the semantic expression is beneath.
const Expr* semantic(const Expr* e) {
  while (true) {
    if (const auto* c = dyn_cast<CXXConstructExpr>(e);
        c && c->getNumArgs() == 1 && c->getSourceRange() == c->getArg(0)->getSourceRange()) {
      e = c->getArg(0);
      continue;
    }
    const Expr* inner = e->IgnoreImplicit();
    if (inner == e)
      return e;
    e = inner;
  }
}

bool isContiguousCall(const Expr* e) {
  const auto* call = dyn_cast<CXXMemberCallExpr>(semantic(e));
  if (!call || !call->getMethodDecl() || call->getMethodDecl()->getNameAsString() != "contiguous")
    return false;
  for (unsigned i = 0; i < call->getNumArgs(); ++i)
    if (!isa<CXXDefaultArgExpr>(call->getArg(i)))
      return false; // an explicit memory format: not a plain conversion
  return true;
}

// Binary and other non-postfix expressions need parentheses before `.contiguous()`.
bool isPostfix(const Expr* e) {
  e = semantic(e);
  if (isa<DeclRefExpr, MemberExpr, ParenExpr, ArraySubscriptExpr, CXXMemberCallExpr, CXXThisExpr>(
          e))
    return true;
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e))
    return op->getOperator() == OO_Call || op->getOperator() == OO_Subscript;
  return isa<CallExpr>(e);
}

// What a call is called, in aten's words where it is an operator: `a + b` -> "add".
std::string calleeName(const Expr* e) {
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e)) {
    const bool unary = op->getNumArgs() == 1;
    switch (op->getOperator()) {
    case OO_Plus:
      return unary ? "positive" : "add";
    case OO_Minus:
      return unary ? "neg" : "sub";
    case OO_Star:
      return "mul";
    case OO_Slash:
      return "div";
    case OO_Percent:
      return "remainder";
    case OO_EqualEqual:
      return "eq";
    case OO_ExclaimEqual:
      return "ne";
    case OO_Less:
      return "lt";
    case OO_Greater:
      return "gt";
    case OO_LessEqual:
      return "le";
    case OO_GreaterEqual:
      return "ge";
    case OO_Amp:
      return "bitwise_and";
    case OO_Pipe:
      return "bitwise_or";
    case OO_Caret:
      return "bitwise_xor";
    case OO_Tilde:
      return "bitwise_not";
    case OO_PlusEqual:
      return "add_";
    case OO_MinusEqual:
      return "sub_";
    case OO_StarEqual:
      return "mul_";
    case OO_SlashEqual:
      return "div_";
    case OO_Subscript:
      return "select";
    default:
      return "";
    }
  }
  if (const auto* call = dyn_cast<CallExpr>(e))
    if (const FunctionDecl* f = call->getDirectCallee())
      return f->getNameAsString();
  return "";
}

// Whether a call by that name runs the op: "transpose" runs aten::transpose.
bool runsOp(const std::string& callee, const std::string& op) {
  if (callee.empty())
    return false;
  const std::size_t colon = op.rfind("::");
  const std::string name = colon == std::string::npos ? op : op.substr(colon + 2);
  return callee == name;
}

std::size_t offsetOf(const std::string& content, std::int64_t line, std::int64_t col) {
  std::size_t off = 0;
  for (std::int64_t l = 1; l < line && off < content.size(); ++l) {
    const std::size_t nl = content.find('\n', off);
    off = nl == std::string::npos ? content.size() : nl + 1;
  }
  return off + static_cast<std::size_t>(std::max<std::int64_t>(col - 1, 0));
}

// The memory format a `.contiguous(...)` call makes: row-major with no argument or
// MemoryFormat::Contiguous, channels-last with ChannelsLast(3d); nullopt for anything else (a
// format computed at run time, or not a conversion).
std::optional<formats::LayoutTarget> conversionTarget(const Expr* e) {
  if (!e)
    return std::nullopt;
  const auto* call = dyn_cast<CXXMemberCallExpr>(semantic(e));
  if (!call || !call->getMethodDecl() || call->getMethodDecl()->getNameAsString() != "contiguous")
    return std::nullopt;
  if (call->getNumArgs() == 0 || isa<CXXDefaultArgExpr>(call->getArg(0)))
    return formats::LayoutTarget::Contiguous;
  const auto* ref = dyn_cast<DeclRefExpr>(call->getArg(0)->IgnoreImpCasts());
  const std::string name = ref ? ref->getDecl()->getNameAsString() : "";
  if (name == "Contiguous")
    return formats::LayoutTarget::Contiguous;
  if (name == "ChannelsLast")
    return formats::LayoutTarget::ChannelsLast;
  if (name == "ChannelsLast3d")
    return formats::LayoutTarget::ChannelsLast3d;
  return std::nullopt;
}

// Any `.contiguous(...)` call, whatever its argument.
bool isConversionCall(const Expr* e) {
  const auto* call = dyn_cast<CXXMemberCallExpr>(semantic(e));
  return call && call->getMethodDecl() && call->getMethodDecl()->getNameAsString() == "contiguous";
}

// What the rewrite appends for a target: `.contiguous()`, or with libtorch's memory format.
std::string conversionText(formats::LayoutTarget t) {
  switch (t) {
  case formats::LayoutTarget::ChannelsLast:
    return ".contiguous(at::MemoryFormat::ChannelsLast)";
  case formats::LayoutTarget::ChannelsLast3d:
    return ".contiguous(at::MemoryFormat::ChannelsLast3d)";
  default:
    return ".contiguous()";
  }
}

TextMatch findByText(const Collector& c, const std::string& file, const std::string& content,
                     const formats::Anchor& a) {
  const std::string want = normalise(a.expr);
  std::vector<const Candidate*> matches;
  for (const auto& [key, list] : c.by_key_)
    if (std::get<0>(key) == file && std::get<2>(key) == want &&
        sameFunction(a.function, std::get<1>(key)))
      for (const auto& cand : list)
        matches.push_back(&cand);
  std::sort(matches.begin(), matches.end(),
            [](const Candidate* x, const Candidate* y) { return x->begin < y->begin; });
  TextMatch m;
  m.matches = matches.size();
  const auto pick =
      formats::pickAmongMatches(matches.size(), a.ordinal, a.line, [&](std::size_t i) {
        return static_cast<std::int64_t>(
            1 + std::count(content.begin(), content.begin() + matches[i]->begin, '\n'));
      });
  if (pick)
    m.candidate = matches[*pick];
  return m;
}

std::function<bool(const std::string&, const std::string&)>
filesNamedBy(std::size_t count, std::function<const formats::Anchor&(std::size_t)> anchor,
             std::function<bool(std::size_t)> open) {
  return [count, anchor = std::move(anchor), open = std::move(open)](const std::string& real,
                                                                     const std::string& spelled) {
    for (std::size_t i = 0; i < count; ++i)
      if (open(i) && (sameFile(anchor(i).file, real) || sameFile(anchor(i).file, spelled)))
        return true;
    return false;
  };
}

// A position may be shared (GCC puts `a + f(b)` at its last `)`, which ends `f(b)` too): a call
// named like the op wins over a smaller one that is not, and the anchor's function over others.
Found findByPosition(const Collector& c, const std::string& file, const std::string& content,
                     const formats::Anchor& a) {
  const std::size_t off = offsetOf(content, a.line, a.col);
  for (int pass = 0; pass < 4; ++pass) {
    const bool by_function = pass % 2 == 0 && !a.function.empty();
    const bool by_name = pass < 2 && !a.op.empty();
    Found best;
    for (const auto& [key, list] : c.by_key_) {
      if (std::get<0>(key) != file || (by_function && !sameFunction(a.function, std::get<1>(key))))
        continue;
      for (const auto& cand : list)
        if (cand.call && cand.begin <= off && off < cand.end &&
            (!by_name || runsOp(cand.callee, a.op)) &&
            (!best.candidate ||
             cand.end - cand.begin < best.candidate->end - best.candidate->begin))
          best = {&cand, &std::get<1>(key), &std::get<2>(key)};
    }
    if (best.candidate)
      return best;
  }
  // No call covers the column: GCC's line table for an instantiated function template puts the
  // statement's column there (`auto y = x.permute(...)` at `y`). The one call on the anchor's line
  // in its function that runs its op, if exactly one does.
  if (a.function.empty() || a.op.empty())
    return {};
  const std::size_t line_begin = offsetOf(content, a.line, 1);
  const std::size_t nl = content.find('\n', line_begin);
  const std::size_t line_end = nl == std::string::npos ? content.size() : nl;
  Found only;
  int count = 0;
  for (const auto& [key, list] : c.by_key_) {
    if (std::get<0>(key) != file || !sameFunction(a.function, std::get<1>(key)))
      continue;
    for (const auto& cand : list)
      if (cand.call && cand.begin >= line_begin && cand.begin < line_end &&
          runsOp(cand.callee, a.op) && ++count == 1)
        only = {&cand, &std::get<1>(key), &std::get<2>(key)};
  }
  return count == 1 ? only : Found{};
}

} // namespace xalloc::cppsource
