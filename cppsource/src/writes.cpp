// rawWriteOf: what in a function could write a tensor's storage where the profiler does not
// see it (an accessor, a raw pointer, an in-place call, an out= argument, a non-const
// reference, a function whose body is elsewhere), for the value an expression computes and the
// tensors it is a view of. Converting such a value (or removing its conversion) would move the
// write to a copy, or show a stale copy to later reads: xrewrite --cpp never does it.
#include "xalloc/cppsource/ast.h"

#include <set>
#include <string>
#include <unordered_map>

namespace xalloc::cppsource {

namespace {

// Calls whose result shares the object's storage (or may: reshape, contiguous and to return the
// object itself when nothing needs copying).
bool viewLike(const std::string& name) {
  static const std::set<std::string> kViews = {
      "transpose",  "t",        "permute",  "view",      "view_as",    "reshape",   "reshape_as",
      "narrow",     "slice",    "select",   "expand",    "expand_as",  "unsqueeze", "squeeze",
      "as_strided", "index",    "diagonal", "unflatten", "flatten",    "movedim",   "moveaxis",
      "swapaxes",   "swapdims", "unfold",   "real",      "imag",       "detach",    "alias",
      "contiguous", "to",       "type_as",  "chunk",     "split",      "unbind",    "T",
      "mT",         "H",        "mH",       "data",      "operator[]", "squeeze_",  "unsqueeze_"};
  return kViews.count(name) > 0;
}

// Member calls that hand out the storage itself.
bool rawAccess(const std::string& name) {
  return name == "data_ptr" || name == "mutable_data_ptr" || name == "accessor" ||
         name == "packed_accessor32" || name == "packed_accessor64" ||
         name == "generic_packed_accessor" || name == "unsafeGetTensorImpl" || name == "storage" ||
         name == "unsafe_data";
}

// libtorch's functions (and the standard library's) write only what their signatures say (in
// place, out=, a non-const reference): known by their header, or by their namespace when the
// headers are reached with -I.
bool libraryFunction(const SourceManager& sm, const FunctionDecl* f) {
  if (sm.isInSystemHeader(sm.getFileLoc(f->getLocation())))
    return true;
  const std::string q = f->getQualifiedNameAsString();
  for (const char* ns : {"at::", "torch::", "c10::", "std::", "caffe2::"})
    if (q.rfind(ns, 0) == 0)
      return true;
  return false;
}

const VarDecl* tensorVar(const Expr* e) {
  const auto* ref = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts());
  const auto* var = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
  return var && isTensorType(var->getType()) ? var : nullptr;
}

// The variable a chain of view calls on `e` starts from (`x.transpose(0, 1)[2]` -> x).
const VarDecl* viewRoot(const Expr* e) {
  e = semantic(e);
  while (true) {
    if (const VarDecl* v = tensorVar(e))
      return v;
    if (const auto* m = dyn_cast<CXXMemberCallExpr>(e)) {
      const auto* method = m->getMethodDecl();
      if (!method || !viewLike(method->getNameAsString()))
        return nullptr;
      e = semantic(m->getImplicitObjectArgument());
      continue;
    }
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e);
        op && op->getOperator() == OO_Subscript && op->getNumArgs() > 0) {
      e = semantic(op->getArg(0));
      continue;
    }
    if (const auto* p = dyn_cast<ParenExpr>(e)) {
      e = semantic(p->getSubExpr());
      continue;
    }
    return nullptr;
  }
}

class Analysis {
public:
  Analysis(ASTContext& ctx, int depth) : ctx_(ctx), sm_(ctx.getSourceManager()), depth_(depth) {}

  std::string run(const FunctionDecl* fn, std::set<const VarDecl*> family, const Expr* e) {
    if (!fn || !fn->hasBody())
      return "";
    fn_ = fn;
    mapParents(fn->getBody());
    collectBindings(fn->getBody());
    if (e) {
      // The variable the expression initialises or is assigned to, and those it reads.
      if (const VarDecl* v = initialised(e))
        family.insert(v);
      addReads(e, family);
    }
    close(family);
    family_ = family;
    return findWrite(fn->getBody());
  }

private:
  // Every tensor variable, with what it is bound to (its initializer, and each plain
  // assignment `v = ...`).
  void collectBindings(const Stmt* s) {
    for (const Stmt* child : s->children())
      if (child)
        collectBindings(child);
    if (const auto* ds = dyn_cast<DeclStmt>(s)) {
      for (const Decl* d : ds->decls())
        if (const auto* v = dyn_cast<VarDecl>(d); v && v->getInit() && isTensorType(v->getType()))
          bindings_.push_back({v, v->getInit()});
    } else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(s);
               op && op->getOperator() == OO_Equal && op->getNumArgs() == 2) {
      if (const VarDecl* v = tensorVar(op->getArg(0)))
        bindings_.push_back({v, op->getArg(1)});
    }
  }

  const VarDecl* initialised(const Expr* e) const {
    for (const auto& [v, init] : bindings_)
      if (semantic(init) == semantic(e))
        return v;
    return nullptr;
  }

  void addReads(const Stmt* s, std::set<const VarDecl*>& out) const {
    if (const auto* e = dyn_cast<Expr>(s))
      if (const VarDecl* v = tensorVar(e))
        out.insert(v);
    for (const Stmt* child : s->children())
      if (child)
        addReads(child, out);
  }

  // Variables that alias a member (views of it, what it is a view of, references, copies of
  // the handle), to a fixpoint.
  void close(std::set<const VarDecl*>& family) const {
    bool grew = true;
    while (grew) {
      grew = false;
      for (const auto& [v, init] : bindings_) {
        const VarDecl* root = viewRoot(init);
        if (!root)
          continue;
        if (family.count(root) && family.insert(v).second)
          grew = true;
        if (family.count(v) && family.insert(root).second)
          grew = true;
      }
    }
  }

  void mapParents(const Stmt* s) {
    for (const Stmt* child : s->children())
      if (child) {
        parents_[child] = s;
        mapParents(child);
      }
  }
  const Stmt* parent(const Stmt* s) const {
    auto it = parents_.find(s);
    return it == parents_.end() ? nullptr : it->second;
  }

  std::string at(const Stmt* s) const {
    const PresumedLoc p = sm_.getPresumedLoc(sm_.getFileLoc(s->getBeginLoc()));
    return p.isValid() ? " at line " + std::to_string(p.getLine()) : "";
  }

  std::string findWrite(const Stmt* s) {
    for (const Stmt* child : s->children())
      if (child)
        if (std::string w = findWrite(child); !w.empty())
          return w;
    const auto* ref = dyn_cast<DeclRefExpr>(s);
    const auto* var = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
    if (!var || !family_.count(var))
      return "";
    return writeAbove(ref, var->getNameAsString());
  }

  // Walks up from a use of a family variable through the views made of it, to what is done
  // with them.
  std::string writeAbove(const Expr* use, const std::string& name) {
    const Stmt* cur = use;
    for (const Stmt* p = parent(cur); p; cur = p, p = parent(p)) {
      if (isa<ImplicitCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ParenExpr,
              ExprWithCleanups>(p))
        continue;
      if (const auto* c = dyn_cast<CXXConstructExpr>(p); c && c->getNumArgs() == 1)
        continue; // a copy of the handle: followed as what it becomes
      if (const auto* member = dyn_cast<MemberExpr>(p)) {
        const std::string m = member->getMemberDecl()->getNameAsString();
        const Stmt* call = parent(member);
        if (rawAccess(m)) {
          if (readOnly(call))
            return "";
          return "`" + name + "` is written through " + m + "()" + at(member);
        }
        if (!m.empty() && m.back() == '_' && m != "requires_grad_" && m != "squeeze_" &&
            m != "unsqueeze_")
          return "`" + name + "` is written in place by " + m + "()" + at(member);
        if (viewLike(m) && call) {
          p = call; // the view: what is done with it counts too
          continue;
        }
        return "";
      }
      if (const auto* op = dyn_cast<CXXOperatorCallExpr>(p)) {
        const auto k = op->getOperator();
        const bool first = op->getNumArgs() > 0 &&
                           op->getArg(0)->IgnoreImplicit() == dyn_cast<Expr>(cur)->IgnoreImplicit();
        if (k == OO_Subscript && first)
          continue;
        if (first && (k == OO_PlusEqual || k == OO_MinusEqual || k == OO_StarEqual ||
                      k == OO_SlashEqual || k == OO_AmpEqual || k == OO_PipeEqual ||
                      k == OO_CaretEqual || k == OO_LessLessEqual || k == OO_GreaterGreaterEqual))
          return "`" + name + "` is written in place by operator" + getOperatorSpelling(k) + at(op);
        // `v[0] = 1`, `v.index({...}) = t`: Tensor::operator= on a view fills it.
        if (first && k == OO_Equal && !tensorVar(op->getArg(0)))
          return "`" + name + "` is written by an assignment to a view of it" + at(op);
        return argumentWrite(op, cur, name);
      }
      if (const auto* u = dyn_cast<UnaryOperator>(p); u && u->getOpcode() == UO_AddrOf)
        return "the address of `" + name + "` is taken" + at(u);
      if (isa<CallExpr>(p) || isa<CXXConstructExpr>(p))
        return argumentWrite(p, cur, name);
      return "";
    }
    return "";
  }

  // `arg` is an argument of `call`: a non-const reference parameter (an out= argument, a helper
  // taking at::Tensor&) writes it; a function of the program's own is looked into.
  std::string argumentWrite(const Stmt* call, const Stmt* arg, const std::string& name) {
    const FunctionDecl* callee = nullptr;
    std::vector<const Expr*> list;
    std::size_t shift = 0;
    if (const auto* c = dyn_cast<CallExpr>(call)) {
      callee = c->getDirectCallee();
      for (const Expr* a : c->arguments())
        list.push_back(a);
      // A member operator's first argument is the object.
      if (isa<CXXOperatorCallExpr>(c) && isa_and_nonnull<CXXMethodDecl>(callee))
        shift = 1;
    } else if (const auto* k = dyn_cast<CXXConstructExpr>(call)) {
      callee = k->getConstructor();
      for (const Expr* a : k->arguments())
        list.push_back(a);
    }
    if (!callee)
      return "";
    std::size_t index = list.size();
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i] == arg || list[i]->IgnoreImplicit() == dyn_cast<Expr>(arg)->IgnoreImplicit())
        index = i;
    if (index == list.size() || index < shift)
      return "";
    const std::size_t pi = index - shift;
    if (pi >= callee->getNumParams())
      return "";
    const ParmVarDecl* param = callee->getParamDecl(static_cast<unsigned>(pi));
    const QualType t = param->getType();
    const std::string fname = callee->getNameAsString();
    if (t->isLValueReferenceType() && !t.getNonReferenceType().isConstQualified() &&
        isTensorType(t))
      return "`" + name + "` is passed to " + fname + "() as a non-const at::Tensor&" + at(call);
    if (libraryFunction(sm_, callee) || isa<CXXConstructorDecl>(callee))
      return ""; // libtorch writes only what it says (in place, out=)
    // The program's own function: its body decides (a const at::Tensor& still reaches the data).
    const FunctionDecl* def = callee->getDefinition();
    if (!def || !def->hasBody())
      return "`" + name + "` is passed to " + fname +
             "(), whose body is not in this file (it may write the tensor's data)" + at(call);
    if (depth_ >= 3 || def == fn_)
      return "";
    Analysis inner(ctx_, depth_ + 1);
    const ParmVarDecl* p = def->getParamDecl(static_cast<unsigned>(pi));
    if (std::string w = inner.run(def, {p}, nullptr); !w.empty())
      return "`" + name + "` is passed to " + fname + "()" + at(call) + ", where " + w;
    return "";
  }

  // A raw access whose result is only read: bound to a pointer to const, or an accessor of
  // const elements.
  bool readOnly(const Stmt* call) const {
    for (const Stmt* p = call ? parent(call) : nullptr; p; p = parent(p)) {
      const auto* cast = dyn_cast<ImplicitCastExpr>(p);
      if (!cast)
        return false;
      const QualType t = cast->getType();
      if (t->isPointerType() && t->getPointeeType().isConstQualified())
        return true;
    }
    return false;
  }

  ASTContext& ctx_;
  SourceManager& sm_;
  int depth_;
  const FunctionDecl* fn_ = nullptr;
  std::unordered_map<const Stmt*, const Stmt*> parents_;
  std::vector<std::pair<const VarDecl*, const Expr*>> bindings_;
  std::set<const VarDecl*> family_;
};

} // namespace

std::string rawWriteOf(ASTContext& ctx, const FunctionDecl* fn, const Expr* e) {
  return Analysis(ctx, 0).run(fn, {}, e);
}

} // namespace xalloc::cppsource
