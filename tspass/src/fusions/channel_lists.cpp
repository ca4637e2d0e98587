// Lists of feature maps that only channel concatenations read (DenseNet's dense blocks) kept
// channels-last after fast-form regions (rewrite.h): each part goes in channels-last (a region's
// packed output as it is, its exit conversion dropped; anything else converted once), so every
// concatenation of the list is channels-last and the next region's entry converts nothing.
#include <algorithm>
#include <iterator>
#include <unordered_set>
#include <vector>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/layout_families.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isTensorList(const Value* v) {
  auto l = v->type()->cast<c10::ListType>();
  return l && l->getElementType()->cast<c10::TensorType>();
}

// Built by prim::ListConstruct, grown by aten::append, read by aten::cat(list, 1) alone.
bool isChannelList(const Value* list) {
  if (list->node()->kind() != c10::prim::ListConstruct || !isTensorList(list))
    return false;
  for (const auto& u : list->uses()) {
    if (hasKind(u.user, "aten::append") && u.offset == 0)
      continue;
    if (!hasKind(u.user, "aten::cat") || u.offset != 0 || u.user->inputs().size() != 2)
      return false;
    auto dim = torch::jit::toIValue(u.user->input(1));
    if (!dim || !dim->isInt() || dim->toInt() != 1)
      return false;
  }
  return true;
}

// Whether a value that may now come channels-last where it came row-major is read only by ops
// that give the same values from any layout, down to conversions, sizes and other channel lists.
bool readsAnyLayout(const Value* v, int depth) {
  static const std::unordered_set<std::string> kAny = {
      "aten::batch_norm",   "aten::relu",       "aten::relu_",
      "aten::conv2d",       "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
      "aten::max_pool2d",   "aten::dropout",    "aten::flatten",
      "xalloc::max_pool2d", "aten::hardtanh",   "aten::hardtanh_"};
  if (depth > 8)
    return false;
  for (const auto& u : v->uses()) {
    const Node* n = u.user;
    if (readsMetadataOnly(n) || hasKind(n, "aten::contiguous"))
      continue;
    if ((hasKind(n, "xalloc::conv2d_packed") || hasKind(n, "xalloc::conv2d_packed_add") ||
         hasKind(n, "xalloc::linear_packed") || hasKind(n, "aten::linear") ||
         hasKind(n, "xalloc::to_blocked")) &&
        u.offset == 0)
      continue; // the same result from any layout (a linear's: after a flatten)
    if (n->kind() == c10::prim::ListConstruct && isChannelList(n->output()))
      continue;
    if (hasKind(n, "aten::append") && u.offset == 1 && isChannelList(n->input(0)))
      continue;
    if (!kAny.count(n->kind().toQualString()) || u.offset != 0 || n->outputs().size() != 1)
      return false;
    if (n->output()->type()->cast<c10::TensorType>() && !readsAnyLayout(n->output(), depth + 1))
      return false;
  }
  return true;
}

// A value the fast form's ops hand on channels-last, or a conversion to it.
bool madeChannelsLast(const Value* v) {
  const Node* n = v->node();
  if (hasKind(n, "aten::contiguous") && n->inputs().size() == 2)
    return isChannelsLastContiguousCall(n);
  return hasKind(n, "xalloc::conv2d_packed") || hasKind(n, "xalloc::conv2d_packed_add") ||
         hasKind(n, "xalloc::max_pool2d");
}

// The list's parts, each as the node that gives it and its input there: the list's first
// elements and every appended tensor (nodes as const as the list given).
template <class V> auto listParts(V* list) {
  std::vector<std::pair<decltype(list->node()), std::size_t>> parts;
  for (std::size_t i = 0; i < list->node()->inputs().size(); ++i)
    parts.emplace_back(list->node(), i);
  for (const auto& u : list->uses())
    if (hasKind(u.user, "aten::append"))
      parts.emplace_back(u.user, 1);
  return parts;
}

// Channels-last is a 4-D format: a list is kept so only where a part is shown to be 4-D (a 2-D
// convolution's or pooling's output, packed or not, a channels-last conversion, a type that says
// so: concatenated parts have one rank) and none is shown to be another rank (S3D's 5-D lists,
// whose blocked parts ATen's channels-last conversion refuses).
bool partsAre4d(const Value* list) {
  bool shown = false;
  for (const auto& [user, i] : listParts(list)) {
    const Value* p = user->input(i);
    if (auto t = p->type()->cast<c10::TensorType>(); t && t->dim()) {
      if (*t->dim() != 4)
        return false;
      shown = true;
    }
    const Node* n = p->node();
    if (isRowMajorContiguousCall(n))
      n = n->input(0)->node(); // a region's exit conversion: what it converts
    static const char* const k2d[] = {"aten::conv2d", "aten::max_pool2d", "aten::avg_pool2d",
                                      "aten::adaptive_avg_pool2d"};
    shown =
        shown || madeChannelsLast(n->output(0)) ||
        std::any_of(std::begin(k2d), std::end(k2d), [&](const char* k) { return hasKind(n, k); });
  }
  return shown;
}

bool listStaysChannelsLast(const Value* list) {
  if (!isChannelList(list) || !partsAre4d(list))
    return false;
  for (const auto& u : list->uses())
    if (hasKind(u.user, "aten::cat") && !readsAnyLayout(u.user->output(), 0))
      return false;
  return true;
}

} // namespace

bool concatenatesChannelsLastList(const Value* v) {
  const Node* n = v->node();
  return hasKind(n, "aten::cat") && n->inputs().size() == 2 && listStaysChannelsLast(n->input(0));
}

std::int64_t channelListsChannelsLast(torch::jit::Graph& graph) {
  // The lists first: the loop below destroys conversions that allNodes would still hold.
  std::vector<Node*> lists;
  for (Node* n : allNodes(graph))
    if (n->kind() == c10::prim::ListConstruct)
      lists.push_back(n);
  std::int64_t kept = 0;
  for (Node* l : lists) {
    if (!listStaysChannelsLast(l->output()))
      continue;
    for (auto [user, i] : listParts(l->output())) {
      Value* part = user->input(i);
      Node* made = part->node();
      if (isRowMajorContiguousCall(made) && madeChannelsLast(made->input(0)) &&
          part->uses().size() == 1) {
        user->replaceInput(i, made->input(0)); // a region's exit conversion: not needed
        made->destroy();
        continue;
      }
      if (madeChannelsLast(part))
        continue;
      torch::jit::WithInsertPoint guard(user);
      Value* mf = graph.insertConstant(static_cast<std::int64_t>(c10::MemoryFormat::ChannelsLast));
      Node* c = graph.create(c10::aten::contiguous, {part, mf});
      c->output()->setType(part->type());
      c->insertBefore(user);
      c->setSourceRange(user->sourceRange());
      c->setScope(user->scope());
      user->replaceInput(i, c->output());
    }
    ++kept;
  }
  return kept;
}

} // namespace xalloc::tspass
