// Convolutions of concatenations, split (packed_convs.h): conv(cat([a, b], 1), W, bias) is
// conv(a, W[:, :Ca], bias) + conv(b, W[:, Ca:]), and the packed op adds the second to the first
// in its own pass. The concatenation's copy of every piece (a SqueezeNet's fire module's output,
// the whole activation) goes; what is added is one small output read once more. Ops that act on
// each channel alone between the two (a max pooling) run on each piece instead.
#include <algorithm>
#include <optional>
#include <unordered_set>

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>

#include "packed_convs.h"
#include "xalloc/tspass/layout_families.h"

namespace xalloc::tspass::layouts {

namespace {

constexpr std::size_t kMaxPieces = 4;    // more: the small convolutions cost more than the copy
constexpr std::int64_t kMinChannels = 8; // a thinner piece makes an inefficient convolution

// An op that computes each channel from that channel alone, one tensor in and one out, and does
// not write its input: a pooling, an activation.
bool actsPerChannel(const Node* n) {
  const FamilyInfo f = layoutFamily(n);
  return (f.family == LayoutFamily::Pool || f.family == LayoutFamily::Unary) && !f.in_place &&
         n->outputs().size() == 1 && !n->inputs().empty();
}

// How many channels (dimension 1) `v` has: its type's, or its producer's (a convolution's
// constant weight, a per-channel op's input, a concatenation's pieces).
std::optional<std::int64_t> channelsOf(const Value* v, int depth = 0) {
  if (depth > 16)
    return std::nullopt;
  if (auto t = v->type()->cast<c10::TensorType>()) {
    auto sizes = t->sizes().concrete_sizes();
    if (sizes && sizes->size() >= 2)
      return (*sizes)[1];
  }
  const Node* p = v->node();
  if (isConv(p)) {
    auto w = constantTensor(p->input(1));
    if (w && w->dim() >= 2)
      return w->size(0);
    return std::nullopt;
  }
  if (actsPerChannel(p) || layoutFamily(p).in_place)
    return channelsOf(p->input(0), depth + 1);
  return std::nullopt;
}

// conv(pool(cat(list))) or conv(cat(list)): what one split replaces.
struct CatConv {
  Node* conv = nullptr;
  Node* per_channel = nullptr; // the op between, or none
  Node* cat = nullptr;
  Node* list = nullptr;
  std::vector<std::int64_t> channels; // of each piece
};

std::optional<CatConv> catBefore(Node* conv, const std::unordered_set<const Node*>& in) {
  auto p = convParams(conv);
  if (!p || p->groups != 1)
    return std::nullopt;
  CatConv c;
  c.conv = conv;
  Value* x = conv->input(0);
  Node* n = x->node();
  if (actsPerChannel(n) && in.count(n) && x->uses().size() == 1 &&
      n->owningBlock() == conv->owningBlock()) {
    c.per_channel = n;
    x = n->input(0);
    n = x->node();
  }
  if (n->kind() != c10::aten::cat || !in.count(n) || x->uses().size() != 1 ||
      n->owningBlock() != conv->owningBlock())
    return std::nullopt;
  auto dim = torch::jit::toIValue(n->input(1));
  const std::int64_t rank = p->weight.dim();
  if (!dim || !dim->isInt() || !(dim->toInt() == 1 || dim->toInt() == 1 - rank))
    return std::nullopt;
  Node* list = n->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct || n->input(0)->uses().size() != 1 ||
      list->inputs().size() < 2 || list->inputs().size() > kMaxPieces)
    return std::nullopt;
  std::int64_t total = 0;
  for (const Value* v : list->inputs()) {
    auto ch = channelsOf(v);
    if (!ch || *ch < kMinChannels)
      return std::nullopt;
    c.channels.push_back(*ch);
    total += *ch;
  }
  if (total != p->weight.size(1))
    return std::nullopt;
  c.cat = n;
  c.list = list;
  return c;
}

void insertAfter(std::vector<Node*>& nodes, const Node* at, const std::vector<Node*>& added) {
  auto it = std::find(nodes.begin(), nodes.end(), at);
  nodes.insert(it == nodes.end() ? it : it + 1, added.begin(), added.end());
}

void split(torch::jit::Graph& g, LayoutRegion& r, const CatConv& c,
           std::unordered_set<const Node*>& adds) {
  const ConvParams p = *convParams(c.conv);
  Value* none = topConstant(g, c10::IValue());
  Value* one = topConstant(g, static_cast<std::int64_t>(1));
  std::vector<Node*> added;
  Value* sum = nullptr;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < c.channels.size(); ++i) {
    Value* piece = c.list->input(i);
    if (c.per_channel) {
      Node* m = g.create(c.per_channel->kind(), c.per_channel->inputs());
      m->replaceInput(0, piece);
      place(m, c.conv, c.per_channel);
      m->output()->setType(
          c.per_channel->output()->type()->expectRef<c10::TensorType>().dimensionedOnly());
      added.push_back(m);
      piece = m->output();
    }
    const at::Tensor w = p.weight.narrow(1, offset, c.channels[i]).contiguous();
    offset += c.channels[i];
    Value* wv = topConstant(g, w);
    wv->setDebugName(c.conv->input(1)->debugName() + "_part");
    std::vector<Value*> args(c.conv->inputs().begin(), c.conv->inputs().end());
    args[0] = piece;
    args[1] = wv;
    args[2] = i == 0 ? c.conv->input(2) : none;
    Node* conv = place(g.create(c.conv->kind(), args), c.conv, c.conv);
    conv->output()->setType(c.conv->output()->type());
    added.push_back(conv);
    if (!sum) {
      sum = conv->output();
      continue;
    }
    // The newest piece first: fuseResidualAdds makes it the packed add, the sum its residual.
    Node* add = place(g.create(c10::aten::add, {conv->output(), sum, one}), c.conv, c.conv);
    add->output()->setType(c.conv->output()->type());
    added.push_back(add);
    adds.insert(add);
    sum = add->output();
  }
  insertAfter(r.nodes, c.conv, added);
  dropNode(c.conv, sum, r.nodes);
  for (Node* n : {c.per_channel, c.cat, c.list}) // read by nothing now, in this order
    if (n)
      removeNode(n, r.nodes);
}

} // namespace

std::unordered_set<const Node*> splitConvsOfCats(torch::jit::Graph& g, LayoutRegion& r) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  std::vector<CatConv> found;
  {
    // The analysis borrows the graph for this scope (a shared_ptr that does not own it).
    torch::jit::AliasDb alias(std::shared_ptr<torch::jit::Graph>(&g, [](torch::jit::Graph*) {}));
    for (Node* n : r.nodes)
      if (isConv(n))
        if (auto c = catBefore(n, in))
          // The split reads the pieces where the convolution was, the concatenation copied
          // them where it was: nothing in between may write one.
          if (unwrittenBetween(c->cat, c->conv,
                               {c->list->inputs().begin(), c->list->inputs().end()}, alias))
            found.push_back(*c);
  }
  std::unordered_set<const Node*> adds;
  for (const CatConv& c : found)
    split(g, r, c, adds);
  return adds;
}

} // namespace xalloc::tspass::layouts
