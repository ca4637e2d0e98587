// MutationInfo: alias analysis refined by memory roots.
#include "xalloc/tspass/mutation.h"

#include <algorithm>
#include <set>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr long kUnknown = -1;
constexpr long kModuleState = -2;
// Graph inputs count down from -3; storages of tensor attributes from kFirstStorage.
constexpr long kFirstStorage = -(1L << 40);
long inputRoot(std::size_t i) {
  return -3 - static_cast<long>(i);
}
bool isStorageRoot(long r) {
  return r <= kFirstStorage;
}

// A value of this type can hold no tensor, so it points into no tensor's memory: a list index,
// a trip count, a flag assigned to an attribute (`self._has_warned = True` in torchvision's
// detection models).
bool holdsNoTensor(const c10::TypePtr& t) {
  switch (t->kind()) {
  case c10::TypeKind::BoolType:
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::ComplexType:
  case c10::TypeKind::NumberType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::DeviceObjType:
  case c10::TypeKind::ScalarTypeType:
  case c10::TypeKind::LayoutType:
    return true;
  case c10::TypeKind::OptionalType:
    return holdsNoTensor(t->expectRef<c10::OptionalType>().getElementType());
  default:
    return false;
  }
}

bool isContainer(const c10::TypePtr& t) {
  return t->cast<c10::ListType>() || t->cast<c10::DictType>();
}

bool isTensorLike(const c10::TypePtr& t) {
  if (t->cast<c10::TensorType>())
    return true;
  if (auto opt = t->cast<c10::OptionalType>())
    return isTensorLike(opt->getElementType());
  return false;
}

void aliasSets(const c10::AliasInfo& info, std::set<c10::Symbol>& out, bool* wildcard) {
  for (const auto& s : info.beforeSets()) {
    if (s == c10::AliasInfo::wildcardSet())
      *wildcard = true;
    out.insert(s);
  }
  for (const auto& c : info.containedTypes())
    aliasSets(c, out, wildcard);
}

std::vector<long> unite(std::vector<long> a, const std::vector<long>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  if (std::binary_search(a.begin(), a.end(), kUnknown))
    return {kUnknown};
  return a;
}

bool intersects(const std::vector<long>& a, const std::vector<long>& b) {
  if ((!a.empty() && a.front() == kUnknown) || (!b.empty() && b.front() == kUnknown))
    return true;
  for (long x : a)
    if (std::binary_search(b.begin(), b.end(), x))
      return true;
  // Module state not resolved to a storage may be any attribute's.
  auto anyState = [](const std::vector<long>& v) {
    return std::any_of(v.begin(), v.end(),
                       [](long r) { return r == kModuleState || isStorageRoot(r); });
  };
  const bool a_state = std::binary_search(a.begin(), a.end(), kModuleState);
  const bool b_state = std::binary_search(b.begin(), b.end(), kModuleState);
  return (a_state && anyState(b)) || (b_state && anyState(a));
}

} // namespace

MutationInfo::MutationInfo(const std::shared_ptr<torch::jit::Graph>& graph,
                           const torch::jit::Module* self)
    : graph_(graph), db_(std::make_unique<torch::jit::AliasDb>(graph)) {
  if (self && !graph->inputs().empty())
    self_ = self;
  std::vector<const Value*> containers; // every list and dict value
  std::vector<torch::jit::Block*> blocks{graph->block()};
  while (!blocks.empty()) {
    torch::jit::Block* b = blocks.back();
    blocks.pop_back();
    for (const Value* v : b->inputs())
      if (isContainer(v->type()))
        containers.push_back(v);
    for (Node* n : b->nodes()) {
      for (torch::jit::Block* sub : n->blocks())
        blocks.push_back(sub);
      for (const Value* v : n->outputs())
        if (isContainer(v->type()))
          containers.push_back(v);
      if (n->blocks().empty()) {
        collectWriters(n);
        collectStores(n);
      }
      if (n->kind() == c10::prim::Loop)
        loops_.push_back(n);
      // An attribute assigned something that may hold a tensor (flags and numbers cannot make
      // one attribute share another's storage).
      if (n->kind() == c10::prim::SetAttr && !holdsNoTensor(n->inputs().at(1)->type()))
        assigned_[n->s(c10::attr::name)].push_back(n->inputs().at(1));
    }
  }
  resolve(containers);
}

// A container written in place by a node (`aten::append(t[](a!) self, t el)`, `aten::insert`,
// `aten::_set_item` of a dict, `aten::extend`): every other input may end up in it, and a
// tensor read back out of it (`lst[0]`) may be any of them.
void MutationInfo::collectStores(Node* n) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (!schema)
    return;
  const auto& args = schema->arguments();
  for (std::size_t i = 0; i < args.size() && i < n->inputs().size(); ++i) {
    const auto* info = args[i].alias_info();
    const c10::TypePtr& t = n->input(i)->type();
    if (!info || !info->isWrite() || !isContainer(t))
      continue;
    std::vector<const Value*> stored;
    for (std::size_t j = 0; j < n->inputs().size(); ++j)
      if (j != i)
        stored.push_back(n->input(j));
    stores_.emplace_back(n->input(i), std::move(stored));
  }
}

// Three kinds of roots feed back on themselves. Containers grow with what is stored into them,
// and what is stored may itself come out of a container; a loop-carried value is its initial
// value in the first trip and what the body hands on after; an assigned attribute holds what is
// assigned, often made from what it held (`self.anchors = [a.to(d) for a in self.anchors]`).
// All are solved to the fixed point:
// start from nothing, recompute every value afresh each round so nothing is cached from an
// earlier guess, and widen until a round changes nothing (roots only grow, and there are
// finitely many).
void MutationInfo::resolve(const std::vector<const Value*>& containers) {
  // A store into a container is a store into every container that may be the same object (`c =
  // a if flag else b; c.append(t)` stores into a and b), as the alias analysis sees it.
  std::vector<std::vector<const Value*>> targets(stores_.size());
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    const Value* c = stores_[i].first;
    targets[i].push_back(c);
    for (const Value* o : containers)
      if (o != c && db_->mayAlias(c, o))
        targets[i].push_back(o);
  }
  for (bool changed = !stores_.empty() || !loops_.empty() || !assigned_.empty(); changed;) {
    changed = false;
    roots_.clear();
    for (std::size_t i = 0; i < stores_.size(); ++i) {
      std::vector<long> add;
      for (const Value* v : stores_[i].second)
        add = unite(std::move(add), memoryRoots(v));
      for (const Value* t : targets[i]) {
        std::vector<long> grown = unite(stored_roots_[t], add);
        if (grown != stored_roots_[t]) {
          stored_roots_[t] = std::move(grown);
          changed = true;
        }
      }
    }
    for (const auto& [name, values] : assigned_) {
      std::vector<long> est;
      for (const Value* v : values)
        est = unite(std::move(est), memoryRoots(v));
      std::vector<long>& cur = assigned_roots_[name];
      std::vector<long> grown = unite(std::move(est), cur);
      if (grown != cur) {
        cur = std::move(grown);
        changed = true;
      }
    }
    // prim::Loop(max, cond, init...) block(i, carried...) -> (cond, next...)
    for (const Node* loop : loops_) {
      const torch::jit::Block* body = loop->blocks()[0];
      for (std::size_t k = 1; k < body->inputs().size(); ++k) {
        std::vector<long> est =
            unite(memoryRoots(loop->input(k + 1)), memoryRoots(body->outputs()[k]));
        std::vector<long>& cur = carried_roots_[body->inputs()[k]];
        if (est != cur) {
          cur = unite(std::move(est), cur);
          changed = true;
        }
      }
    }
  }
  roots_.clear();
}

MutationInfo::~MutationInfo() = default;

// The tensors a leaf node writes in place: arguments its schema marks `(a!)`. A write to a list
// argument counts only for in-place ops (name ending in '_', like _foreach_add_): append, insert
// and friends change the list, not the tensors in it. Nodes without a schema that the alias
// analysis still calls mutating are taken to write every tensor they receive.
void MutationInfo::collectWriters(Node* n) {
  Writer w{n, {}};
  if (const c10::FunctionSchema* schema = n->maybeSchema()) {
    const bool inplace_name = !schema->name().empty() && schema->name().back() == '_';
    const auto& args = schema->arguments();
    for (std::size_t i = 0; i < args.size() && i < n->inputs().size(); ++i) {
      const auto* info = args[i].alias_info();
      if (!info || !info->isWrite())
        continue;
      const Value* in = n->input(i);
      if (isTensorLike(in->type()) || (inplace_name && in->type()->cast<c10::ListType>()))
        w.written.push_back(in);
    }
  } else if (db_->isMutable(n) && n->kind() != c10::prim::SetAttr) {
    for (const Value* in : n->inputs())
      if (isTensorLike(in->type()) || in->type()->cast<c10::ListType>())
        w.written.push_back(in);
  }
  if (!w.written.empty())
    writers_.push_back(std::move(w));
}

std::vector<long> MutationInfo::memoryRoots(const Value* v) const {
  auto it = roots_.find(v);
  if (it != roots_.end())
    return it->second;
  roots_[v] = {kUnknown}; // cycles (loops) resolve to unknown
  const Node* n = v->node();
  const auto k = n->kind();
  std::vector<long> r;
  // A number, a flag or a string points into no tensor's memory (a list index, a trip count).
  if (holdsNoTensor(v->type())) {
    roots_[v] = r;
    return r;
  }
  auto ofInputs = [&](std::size_t from) {
    std::vector<long> acc;
    for (std::size_t i = from; i < n->inputs().size(); ++i)
      acc = unite(std::move(acc), memoryRoots(n->input(i)));
    return acc;
  };
  if (k == c10::prim::Param) {
    if (n->owningBlock() == graph_->block()) {
      r = {inputRoot(v->offset())};
    } else if (auto c = carried_roots_.find(v); c != carried_roots_.end()) {
      r = c->second; // a loop-carried value: the current estimate (resolve)
    } else if (v->offset() == 0 || n->owningBlock()->owningNode()->kind() != c10::prim::Loop) {
      r = {kUnknown}; // the trip counter (an int), or a block parameter of another kind
    } // else: a loop-carried value not estimated yet, while resolving: nothing so far
  } else if (k == c10::prim::GetAttr) {
    r = assigned_.count(n->s(c10::attr::name)) ? assignedAttributeRoots(v) : attributeRoots(v);
  } else if (k == c10::prim::Constant || k == c10::prim::CreateObject) {
    // (a new object: what its attributes are set to is seen through prim::SetAttr)
    r = {static_cast<long>(v->unique())};
  } else if (k == c10::prim::ListConstruct || k == c10::prim::TupleConstruct ||
             k == c10::prim::DictConstruct || k == c10::prim::ListUnpack ||
             k == c10::prim::TupleUnpack || k == c10::prim::TupleIndex ||
             k == c10::prim::unchecked_cast || k == c10::aten::__getitem__) {
    r = ofInputs(0);
  } else if (k == c10::prim::If) {
    for (const torch::jit::Block* b : n->blocks())
      r = unite(std::move(r), memoryRoots(b->outputs()[v->offset()]));
  } else if (k == c10::prim::Loop) {
    // What the loop hands out: its initial value (no trip) or what the last trip handed on.
    r = unite(memoryRoots(n->input(v->offset() + 2)),
              memoryRoots(n->blocks()[0]->outputs()[v->offset() + 1]));
  } else if (const c10::FunctionSchema* schema = n->maybeSchema()) {
    const auto& ret = schema->returns();
    const c10::AliasInfo* out_info =
        v->offset() < ret.size() ? ret[v->offset()].alias_info() : nullptr;
    if (!out_info) {
      r = {static_cast<long>(v->unique())}; // a fresh allocation
    } else {
      std::set<c10::Symbol> sets;
      bool wildcard = false;
      aliasSets(*out_info, sets, &wildcard);
      if (wildcard) {
        r = {kUnknown};
      } else {
        const auto& args = schema->arguments();
        for (std::size_t i = 0; i < args.size() && i < n->inputs().size(); ++i) {
          const auto* in_info = args[i].alias_info();
          if (!in_info)
            continue;
          std::set<c10::Symbol> in_sets;
          bool in_wild = false;
          aliasSets(*in_info, in_sets, &in_wild);
          bool shared = in_wild;
          for (const auto& s : in_sets)
            shared = shared || sets.count(s);
          if (shared)
            r = unite(std::move(r), memoryRoots(n->input(i)));
        }
        if (r.empty())
          r = {static_cast<long>(v->unique())};
      }
    }
  } else {
    r = {kUnknown};
  }
  if (auto st = stored_roots_.find(v); st != stored_roots_.end())
    r = unite(std::move(r), st->second);
  roots_[v] = r;
  return r;
}

// An attribute the graph assigns, read back: what this run assigned it, or else what the module
// held when the run began, which is its value at load time or what an earlier run assigned it.
// Roots are per value of the graph, not per run, so the roots of what the graph assigns cover
// both runs: a view of the input the caller passes again, one tensor given to two attributes.
std::vector<long> MutationInfo::assignedAttributeRoots(const Value* v) const {
  auto it = assigned_roots_.find(v->node()->s(c10::attr::name));
  return unite(attributeRoots(v), it != assigned_roots_.end() ? it->second : std::vector<long>{});
}

// The storages a chain of prim::GetAttr from `self` reads, as roots: one per storage of the
// tensor, or of the tensors of a list or tuple, it reads; kModuleState when the chain starts
// elsewhere or ends in anything else.
std::vector<long> MutationInfo::attributeRoots(const Value* v) const {
  std::vector<std::string> path;
  const Value* at = v;
  while (at->node()->kind() == c10::prim::GetAttr) {
    path.push_back(at->node()->s(c10::attr::name));
    at = at->node()->input();
  }
  // An object read from an attribute the graph assigns may be any object (the attribute read
  // last, path[0], is resolved by assignedAttributeRoots).
  for (std::size_t i = 1; i < path.size(); ++i)
    if (assigned_.count(path[i]))
      return {kUnknown};
  // An object the caller passes in holds what the caller put there.
  if (at->node()->kind() == c10::prim::Param && at->node()->owningBlock() == graph_->block() &&
      at->offset() > 0)
    return {inputRoot(at->offset())};
  if (!self_ || at != graph_->inputs()[0])
    return {kModuleState};
  c10::IValue obj = self_->_ivalue();
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (!obj.isObject())
      return {kModuleState};
    const auto& o = obj.toObjectRef();
    if (!o.type()->hasAttribute(*it))
      return {kModuleState};
    obj = o.getAttr(*it);
  }
  auto storageRoot = [&](const c10::IValue& e) {
    if (!e.isTensor() || !e.toTensor().defined() || !e.toTensor().has_storage())
      return kModuleState;
    const void* storage = e.toTensor().storage().unsafeGetStorageImpl();
    auto [pos, fresh] = storage_roots_.emplace(storage, 0);
    if (fresh)
      pos->second = kFirstStorage - static_cast<long>(storage_roots_.size() - 1);
    return pos->second;
  };
  std::vector<long> r;
  if (obj.isList())
    for (const c10::IValue& e : obj.toListRef())
      r.push_back(storageRoot(e));
  else if (obj.isTuple())
    for (const c10::IValue& e : obj.toTupleRef().elements())
      r.push_back(storageRoot(e));
  else
    r.push_back(storageRoot(obj));
  return unite(std::move(r), {});
}

bool MutationInfo::hasWriters(const Value* v) const {
  if (!db_->hasWriters(v))
    return false; // the alias analysis is sound: nothing can write to v
  const std::vector<long> mine = memoryRoots(v);
  for (const Writer& w : writers_) {
    if (!db_->writesToAlias(w.node, {const_cast<Value*>(v)}))
      continue;
    for (const Value* target : w.written)
      if (intersects(mine, memoryRoots(target)))
        return true;
  }
  return false;
}

} // namespace xalloc::tspass
