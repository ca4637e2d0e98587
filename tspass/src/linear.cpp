// exposeLinearWeights / restoreLinears: aten::linear written as t + matmul + add and back.
#include "xalloc/tspass/linear.h"

#include <cctype>
#include <string_view>

#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

void collectLinears(Block* block, std::vector<Node*>& out) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::aten::linear && n->inputs().size() == 3 && n->outputs().size() == 1)
      out.push_back(n);
    for (Block* b : n->blocks())
      collectLinears(b, out);
  }
}

// The new node stands where `from` stood: same source range, inlined call stack and scope.
void takePlace(Node* n, const Node* from) {
  n->setSourceRange(from->sourceRange());
  // The mark of the region decision it belongs to (rewrite.h, matchRegionDecisions).
  const auto tag = c10::Symbol::attr("xalloc_region");
  if (from->hasAttribute(tag))
    n->i_(tag, from->i(tag));
  if (auto cs = from->callstack())
    n->setCallStack(*cs);
  auto scope = const_cast<Node*>(from)->scope(); // ScopePtr scope() is not const in 1.13
  if (scope && !scope->isBlank())
    n->setScope(scope);
}

bool isNumbered(const std::string& name) {
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name[0]));
}

// The linear's own output name, when it had one (numbered names are left to the graph).
void keepName(Value* v, const std::string& name) {
  if (!name.empty() && !isNumbered(name))
    v->setDebugName(name);
}

// Characters that continue a value name in printed IR (`%x.1`, `%235`, `%self_w`).
bool continuesName(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

bool onlyUse(const Value* v, const Node* user, std::size_t offset) {
  return v->uses().size() == 1 && v->uses()[0].user == user && v->uses()[0].offset == offset;
}

} // namespace

std::vector<ExposedLinear> exposeLinearWeights(Graph& graph) {
  std::vector<Node*> linears;
  collectLinears(graph.block(), linears);
  std::vector<ExposedLinear> out;
  for (Node* n : linears) {
    Value* x = n->input(0);
    Value* w = n->input(1);
    Value* b = n->input(2);
    const bool has_bias = b->type()->isSubtypeOf(*c10::TensorType::get());
    if (!has_bias && b->type()->kind() != c10::TypeKind::NoneType)
      continue; // Optional[Tensor]: whether there is a bias is known only at run time
    ExposedLinear e;
    e.bias = b;
    e.weight = w;
    e.output_name = n->output()->debugName();
    torch::jit::WithInsertPoint guard(n);
    Value* wt = graph.insert(c10::aten::t, {w});
    e.t = wt->node();
    Value* product = graph.insert(c10::aten::matmul, {x, wt});
    e.matmul = product->node();
    Value* result = product;
    if (has_bias) {
      result = graph.insert(c10::aten::add, {product, b});
      e.add = result->node();
    }
    for (Node* m : {e.t, e.matmul, e.add})
      if (m)
        takePlace(m, n);
    result->setType(n->output()->type());
    n->output()->replaceAllUsesWith(result);
    n->destroy();
    keepName(result, e.output_name);
    out.push_back(std::move(e));
  }
  return out;
}

std::size_t restoreLinears(const std::vector<ExposedLinear>& exposed,
                           std::vector<Renumbered>* renumbered) {
  std::size_t restored = 0;
  for (const ExposedLinear& e : exposed) {
    Value* wt = e.t->output();
    Value* product = e.matmul->output();
    if (!onlyUse(wt, e.matmul, 1) || e.t->input(0) != e.weight)
      continue; // the transposed weight was converted (per call, or once into a constant)
    if (e.add && !onlyUse(product, e.add, 0))
      continue;
    Node* last = e.add ? e.add : e.matmul;
    Graph& graph = *last->owningGraph();
    Node* linear;
    {
      torch::jit::WithInsertPoint guard(last);
      linear = graph.insert(c10::aten::linear, {e.matmul->input(0), e.t->input(0), e.bias})->node();
    }
    takePlace(linear, last);
    Value* result = last->output();
    linear->output()->setType(result->type());
    result->replaceAllUsesWith(linear->output());
    if (e.add) {
      Node* alpha = e.add->inputs().size() > 2 ? e.add->input(2)->node() : nullptr;
      e.add->destroy();
      // The add's alpha (a constant 1 the exposure made) goes with it.
      if (alpha && alpha->kind() == c10::prim::Constant && !alpha->hasUses())
        alpha->destroy();
    }
    e.matmul->destroy();
    e.t->destroy();
    keepName(linear->output(), e.output_name);
    if (renumbered && isNumbered(e.output_name))
      renumbered->push_back({linear->output()->debugName(), e.output_name});
    ++restored;
  }
  return restored;
}

std::string withOriginalNumbers(std::string text, const std::vector<Renumbered>& renumbered) {
  if (renumbered.empty())
    return text;
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '%') {
      std::size_t end = i + 1;
      while (end < text.size() && continuesName(text[end]))
        ++end;
      const std::string_view name(text.data() + i + 1, end - i - 1);
      const std::string* use = nullptr;
      for (const Renumbered& r : renumbered)
        if (name == r.now)
          use = &r.before;
      out += '%';
      out += use ? std::string_view(*use) : name;
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
}

const ExposedLinear* findExposed(const std::vector<ExposedLinear>& exposed, const Node* matmul) {
  for (const ExposedLinear& e : exposed)
    if (e.matmul == matmul)
      return &e;
  return nullptr;
}

} // namespace xalloc::tspass
