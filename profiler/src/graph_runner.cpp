// GraphRunner: node-at-a-time execution of an inlined graph with per-op timing and capture.
#include "xalloc/profiler/graph_runner.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/error.h"
#include "xalloc/profiler/measure.h"

#include "builtins.h"

namespace xalloc::profiler {

using detail::isBuiltin;
using detail::runBuiltin;
using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

namespace {
std::string whereIs(const tspass::GraphIndex& index, const Node* n) {
  auto id = index.opId(n);
  if (id < 0)
    return n->kind().toQualString();
  const auto& a = index.anchor(id);
  std::string s = std::string(n->kind().toQualString());
  if (!a.file.empty())
    s += " at " + a.location();
  return s;
}

bool isControl(const Node* n) {
  auto k = n->kind();
  return k == c10::prim::If || k == c10::prim::Loop || k == c10::prim::GetAttr ||
         k == c10::prim::SetAttr || k == c10::prim::Constant;
}
} // namespace

struct GraphRunner::Impl {
  const tspass::GraphIndex& index;
  // Operation::operator() is not const; running an op does not change the runner.
  mutable std::unordered_map<const Node*, torch::jit::Operation> ops;
  std::unordered_map<const Value*, c10::IValue> constants;
  // Values whose last use (lifted to their defining block) is the key node.
  std::unordered_map<const Node*, std::vector<const Value*>> release_after;

  // Per prim::Loop, every value its body defines (nested blocks included, with their inputs).
  std::unordered_map<const Node*, std::vector<const Value*>> loop_values;

  explicit Impl(const tspass::GraphIndex& idx) : index(idx) {
    prepareBlock(idx.graph().block());
    planReleases(idx.graph().block());
  }

  static void definedIn(const Block* b, std::vector<const Value*>& out) {
    out.insert(out.end(), b->inputs().begin(), b->inputs().end());
    for (const Node* n : b->nodes()) {
      out.insert(out.end(), n->outputs().begin(), n->outputs().end());
      for (const Block* sub : n->blocks())
        definedIn(sub, out);
    }
  }

  void prepareBlock(Block* b) {
    for (Node* n : b->nodes()) {
      if (n->kind() == c10::prim::Constant) {
        auto v = torch::jit::toIValue(n->output());
        if (v)
          constants[n->output()] = *v;
        else if (n->output()->hasUses()) // e.g. a function constant that inlining left in use
          throw InputError("", "cannot evaluate constant " + n->output()->type()->str() + " " +
                                   whereIs(index, n));
        continue;
      }
      for (Block* sub : n->blocks())
        prepareBlock(sub);
      if (n->kind() == c10::prim::Loop)
        definedIn(n->blocks()[0], loop_values[n]);
      if (isControl(n) || isBuiltin(n))
        continue;
      if (n->kind() == c10::prim::CallFunction || n->kind() == c10::prim::fork)
        throw InputError("", "op " + whereIs(index, n) + " is not supported by xprof");
      try {
        ops.emplace(n, n->getOperation());
      } catch (const std::exception& e) {
        throw InputError("", "op " + whereIs(index, n) +
                                 " is not supported by xprof: " + firstLine(e.what()));
      }
    }
  }

  static const Node* liftTo(const Node* n, const Block* b) {
    while (n && n->owningBlock() != b)
      n = n->owningBlock()->owningNode();
    return n;
  }

  void planValue(const Value* v, const Block* b) {
    const Node* last = nullptr;
    for (const auto& use : v->uses()) {
      const Node* user = liftTo(use.user, b);
      if (!user || user->kind() == c10::prim::Return)
        return; // escapes the block: the block's owner or the caller keeps it
      if (!last || last->isBefore(user))
        last = user;
    }
    if (last)
      release_after[last].push_back(v);
  }

  void planReleases(Block* b) {
    for (const Value* v : b->inputs())
      planValue(v, b);
    for (Node* n : b->nodes()) {
      for (const Value* v : n->outputs())
        planValue(v, b);
      for (Block* sub : n->blocks())
        planReleases(sub);
    }
  }

  using Env = std::unordered_map<const Value*, c10::IValue>;

  const c10::IValue& get(const Env& env, const Value* v) const {
    auto it = env.find(v);
    if (it != env.end())
      return it->second;
    auto c = constants.find(v);
    XALLOC_EXPECTS(c != constants.end(), "value %" + v->debugName() + " used before definition");
    return c->second;
  }

  // Replaces `heaviest` by the trip's values in `env` when they hold at least as many bytes of
  // tensors (`heaviest_bytes`, updated); a lighter trip is not copied.
  static void keepIfHeaviest(const std::vector<const Value*>& body_values, const Env& env,
                             std::int64_t& heaviest_bytes,
                             std::vector<std::pair<const Value*, c10::IValue>>& heaviest) {
    std::int64_t bytes = 0;
    for (const Value* v : body_values)
      if (auto it = env.find(v);
          it != env.end() && it->second.isTensor() && it->second.toTensor().defined())
        bytes += static_cast<std::int64_t>(it->second.toTensor().nbytes());
    if (bytes < heaviest_bytes)
      return;
    heaviest_bytes = bytes;
    heaviest.clear();
    for (const Value* v : body_values)
      if (auto it = env.find(v); it != env.end())
        heaviest.emplace_back(v, it->second);
  }

  static bool inLoop(const Node* n) {
    for (const Block* b = n->owningBlock(); b->owningNode(); b = b->owningNode()->owningBlock())
      if (b->owningNode()->kind() == c10::prim::Loop)
        return true;
    return false;
  }

  // What the ops of branch `b` (its nested blocks included) read and made, as they are now.
  void keepBranch(const Block* b, const Env& env,
                  std::unordered_map<const Value*, c10::IValue>& kept) const {
    for (const Node* n : b->nodes()) {
      for (const Value* v : n->inputs())
        if (auto it = env.find(v); it != env.end())
          kept.emplace(v, it->second);
      for (const Value* v : n->outputs())
        if (auto it = env.find(v); it != env.end())
          kept.emplace(v, it->second);
      for (const Block* inner : n->blocks())
        keepBranch(inner, env, kept);
    }
  }

  void runBlock(const Block* b, Env& env, const Options& o, Trace* t) const {
    for (const Node* n : b->nodes()) {
      if (n->kind() == c10::prim::Constant)
        continue;
      runNode(n, env, o, t);
      if (!o.keep_values) {
        auto rel = release_after.find(n);
        if (rel != release_after.end())
          for (const Value* v : rel->second)
            env.erase(v);
      }
    }
  }

  // Calls a registered op as the JIT interpreter does: a vararg op (aten::format, ...) also
  // takes how many inputs it was given, on top of the stack.
  void callOp(const Node* n, torch::jit::Stack& stack) const {
    if (n->maybeSchema() && n->schema().is_vararg())
      stack.emplace_back(static_cast<int64_t>(n->inputs().size()));
    ops.at(n)(stack);
  }

  // A failure names the innermost op that failed and where it is in the model's source.
  struct OpFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  void runNode(const Node* n, Env& env, const Options& o, Trace* t) const {
    try {
      runNodeUnchecked(n, env, o, t);
      if (t && o.keep_values)
        for (const Value* out : n->outputs())
          if (auto it = env.find(out);
              it != env.end() && it->second.isTensor() && it->second.toTensor().defined())
            t->bytes_made[out] += static_cast<std::int64_t>(it->second.toTensor().nbytes());
    } catch (const OpFailure&) {
      throw;
    } catch (const std::exception& e) {
      throw OpFailure(whereIs(index, n) + ": " + firstLine(e.what()));
    }
  }

  void runNodeUnchecked(const Node* n, Env& env, const Options& o, Trace* t) const {
    const auto id = static_cast<std::size_t>(index.opId(n));
    if (t && id < t->op_runs.size())
      ++t->op_runs[id];
    switch (n->kind()) {
    case c10::prim::If: {
      bool cond = get(env, n->input(0)).toBool();
      const Block* b = n->blocks()[cond ? 0 : 1];
      runBlock(b, env, o, t);
      if (t && o.keep_values && inLoop(n) && !t->branch_values.count(b))
        keepBranch(b, env, t->branch_values[b]);
      for (std::size_t i = 0; i < n->outputs().size(); ++i)
        env[n->output(i)] = get(env, b->outputs()[i]);
      return;
    }
    case c10::prim::Loop: {
      const Block* body = n->blocks()[0];
      int64_t max_trips = get(env, n->input(0)).toInt();
      bool cond = get(env, n->input(1)).toBool();
      std::vector<c10::IValue> carried;
      for (std::size_t i = 2; i < n->inputs().size(); ++i)
        carried.push_back(get(env, n->input(i)));
      // A run that keeps its values keeps the body's from its heaviest trip, the last of equals:
      // the trips of a loop over feature maps or a growing sequence differ in size, and one
      // trip's values, all from the same trip, are what its ops are measured on.
      const std::vector<const Value*>* body_values = o.keep_values ? &loop_values.at(n) : nullptr;
      std::vector<std::pair<const Value*, c10::IValue>> heaviest;
      std::int64_t heaviest_bytes = -1;
      for (int64_t trip = 0; trip < max_trips && cond; ++trip) {
        env[body->inputs()[0]] = trip;
        for (std::size_t i = 0; i < carried.size(); ++i)
          env[body->inputs()[i + 1]] = carried[i];
        runBlock(body, env, o, t);
        cond = get(env, body->outputs()[0]).toBool();
        for (std::size_t i = 0; i < carried.size(); ++i)
          carried[i] = get(env, body->outputs()[i + 1]);
        if (body_values)
          keepIfHeaviest(*body_values, env, heaviest_bytes, heaviest);
      }
      if (body_values && !heaviest.empty()) {
        for (const Value* v : *body_values)
          env.erase(v);
        for (auto& [v, value] : heaviest)
          env[v] = std::move(value);
      }
      for (std::size_t i = 0; i < n->outputs().size(); ++i)
        env[n->output(i)] = carried[i];
      return;
    }
    case c10::prim::GetAttr: {
      auto t0 = std::chrono::steady_clock::now();
      const auto& obj = get(env, n->input(0)).toObjectRef();
      env[n->output()] = obj.getAttr(n->s(c10::attr::name));
      if (o.time_ops && t) {
        t->op_ms[id] += msSince(t0);
        t->op_start_ms[id] = std::chrono::duration<double, std::milli>(t0 - t->run_start).count();
      }
      return;
    }
    case c10::prim::SetAttr: {
      get(env, n->input(0)).toObjectRef().setAttr(n->s(c10::attr::name), get(env, n->input(1)));
      return;
    }
    default:
      break;
    }
    torch::jit::Stack stack;
    stack.reserve(n->inputs().size());
    for (const Value* in : n->inputs())
      stack.push_back(get(env, in));
    double cpu0 = o.cpu_time ? processCpuMs() : 0;
    auto t0 = std::chrono::steady_clock::now();
    if (o.time_ops && t)
      t->op_start_ms[id] = std::chrono::duration<double, std::milli>(t0 - t->run_start).count();
    if (isBuiltin(n))
      runBuiltin(n, stack);
    else
      callOp(n, stack);
    if (o.time_ops && t)
      t->op_ms[id] += msSince(t0);
    if (o.cpu_time && t)
      t->op_cpu_ms[id] += processCpuMs() - cpu0;
    XALLOC_EXPECTS(stack.size() == n->outputs().size(),
                   std::string("op ") + n->kind().toQualString() + " left " +
                       std::to_string(stack.size()) + " values for " +
                       std::to_string(n->outputs().size()) + " outputs");
    for (std::size_t i = 0; i < stack.size(); ++i)
      env[n->output(i)] = std::move(stack[i]);
  }
};

GraphRunner::GraphRunner(const tspass::GraphIndex& index) : impl_(std::make_unique<Impl>(index)) {}
GraphRunner::~GraphRunner() = default;

std::vector<c10::IValue> GraphRunner::run(const std::vector<c10::IValue>& inputs,
                                          const Options& options, Trace* trace) const {
  const auto& graph = impl_->index.graph();
  XALLOC_EXPECTS(inputs.size() == graph.inputs().size(),
                 "graph takes " + std::to_string(graph.inputs().size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  if (trace) {
    trace->op_ms.assign(impl_->index.ops().size(), 0.0);
    trace->op_runs.assign(impl_->index.ops().size(), 0);
    trace->op_cpu_ms.assign(impl_->index.ops().size(), 0.0);
    trace->op_start_ms.assign(impl_->index.ops().size(), -1.0);
    trace->bytes_made.clear();
    trace->run_start = std::chrono::steady_clock::now();
  }
  Impl::Env env;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    env[graph.inputs()[i]] = inputs[i];
  impl_->runBlock(graph.block(), env, options, trace);
  std::vector<c10::IValue> outputs;
  for (const Value* v : graph.outputs())
    outputs.push_back(impl_->get(env, v));
  if (trace && options.keep_values)
    trace->values = std::move(env);
  return outputs;
}

std::vector<c10::IValue> GraphRunner::runOp(const Node* node, torch::jit::Stack inputs) const {
  if (isBuiltin(node))
    runBuiltin(node, inputs);
  else
    impl_->callOp(node, inputs);
  return inputs;
}

std::set<const c10::StorageImpl*> GraphRunner::moduleStorages(const Trace& trace) const {
  std::set<const c10::StorageImpl*> out;
  std::vector<const Block*> blocks = {impl_->index.graph().block()};
  while (!blocks.empty()) {
    const Block* b = blocks.back();
    blocks.pop_back();
    for (const Node* n : b->nodes()) {
      for (const Block* sub : n->blocks())
        blocks.push_back(sub);
      if (n->kind() != c10::prim::GetAttr && n->kind() != c10::prim::Constant)
        continue;
      for (const Value* v : n->outputs()) {
        if (!hasValue(trace, v))
          continue;
        const c10::IValue& iv = valueOf(trace, v);
        if (iv.isTensor())
          if (const c10::StorageImpl* s = storageOf(iv.toTensor()))
            out.insert(s);
      }
    }
  }
  return out;
}

namespace {
// The branch values `block` (or a branch around it) saw, where it has them.
const c10::IValue* branchValue(const GraphRunner::Trace& trace, const Value* v,
                               const torch::jit::Block* block) {
  for (const torch::jit::Block* b = block; b && b->owningNode(); b = b->owningNode()->owningBlock())
    if (auto it = trace.branch_values.find(b); it != trace.branch_values.end())
      if (auto at = it->second.find(v); at != it->second.end())
        return &at->second;
  return nullptr;
}
} // namespace

const c10::IValue& GraphRunner::valueOf(const Trace& trace, const Value* v,
                                        const torch::jit::Block* block) const {
  if (const c10::IValue* seen = branchValue(trace, v, block))
    return *seen;
  return impl_->get(trace.values, v);
}

bool GraphRunner::hasValue(const Trace& trace, const Value* v,
                           const torch::jit::Block* block) const {
  return branchValue(trace, v, block) || trace.values.count(v) > 0 || impl_->constants.count(v) > 0;
}

bool GraphRunner::canRunInIsolation(const Node* node) {
  // ATen's ops and those of libraries of custom ops (torchvision::roi_align, a project's own)
  // run through the dispatcher alike; the interpreter's own instructions (prim::) do not.
  if (node->kind().ns() == c10::namespaces::prim || !node->maybeSchema() || !node->maybeOperator())
    return false;
  const auto& schema = node->schema();
  for (const auto& arg : schema.arguments())
    if (arg.alias_info() && arg.alias_info()->isWrite())
      return false;
  return !node->hasSideEffects() && !node->isNondeterministic();
}

const c10::StorageImpl* storageOf(const at::Tensor& t) {
  return t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
}

std::vector<std::string> viewChain(const Value* v, const GraphRunner::Trace& t) {
  std::vector<std::string> chain;
  const Value* cur = v;
  for (int depth = 0; depth < 16; ++depth) {
    auto it = t.values.find(cur);
    if (it == t.values.end() || !it->second.isTensor())
      break;
    const c10::StorageImpl* storage = storageOf(it->second.toTensor());
    const Node* p = cur->node();
    const Node* reads = p;
    if (p->kind() == c10::prim::ListUnpack)
      reads = p->input(0)->node(); // x.split(...) -> ListUnpack: the view op is the split
    if (reads->kind() == c10::prim::Param || reads->kind() == c10::prim::GetAttr)
      break;
    const Value* base = nullptr;
    for (const Value* in : reads->inputs()) {
      auto jt = t.values.find(in);
      if (jt != t.values.end() && jt->second.isTensor() &&
          storageOf(jt->second.toTensor()) == storage) {
        base = in;
        break;
      }
    }
    if (!base)
      break;
    chain.push_back(reads->kind().toQualString());
    cur = base;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

} // namespace xalloc::profiler
