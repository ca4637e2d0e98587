// applySchedule: the sync / remove graph edits, found by anchor and checked for safety.
#include "xalloc/tspass/rewrite.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/formats/anchor_match.h"
#include "xalloc/tspass/constants.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/mutation.h"
#include "xalloc/tspass/producer_fusion.h"

namespace xalloc::tspass {

using formats::Action;
using formats::Anchor;
using formats::Decision;
using torch::jit::Node;
using torch::jit::Value;

const char* applyStatusName(ApplyStatus s) {
  switch (s) {
  case ApplyStatus::Applied:
    return "applied";
  case ApplyStatus::AlreadyApplied:
    return "already applied";
  case ApplyStatus::NotFound:
    return "not found";
  case ApplyStatus::Skipped:
    return "skipped";
  }
  return "?";
}

std::size_t ApplyReport::count(ApplyStatus s) const {
  std::size_t n = 0;
  for (const auto& r : results)
    n += r.status == s;
  return n;
}

bool isRowMajorContiguousCall(const Node* n) {
  if (n->kind() != c10::aten::contiguous || n->inputs().empty())
    return false;
  if (n->inputs().size() < 2)
    return true;
  auto fmt = torch::jit::toIValue(n->input(1));
  if (!fmt)
    return false; // a memory format computed at run time: not ours to touch
  if (fmt->isNone())
    return true;
  return fmt->isInt() && fmt->toInt() == static_cast<int64_t>(c10::MemoryFormat::Contiguous);
}

namespace {
bool isContiguousCallTo(const Node* n, c10::MemoryFormat mf) {
  if (n->kind() != c10::aten::contiguous || n->inputs().size() != 2)
    return false;
  auto fmt = torch::jit::toIValue(n->input(1));
  return fmt && fmt->isInt() && fmt->toInt() == static_cast<int64_t>(mf);
}
} // namespace

bool isChannelsLastContiguousCall(const Node* n) {
  return isContiguousCallTo(n, c10::MemoryFormat::ChannelsLast);
}

bool isChannelsLast3dContiguousCall(const Node* n) {
  return isContiguousCallTo(n, c10::MemoryFormat::ChannelsLast3d);
}

namespace {

// Lifts `n` to the block that defines `v`, so a node inserted before the result dominates `n`.
Node* liftToBlockOf(Node* n, const Value* v) {
  const torch::jit::Block* target = v->node()->owningBlock();
  if (v->node()->kind() == c10::prim::Param)
    target = v->owningGraph()->block();
  while (n && n->owningBlock() != target) {
    Node* owner = n->owningBlock()->owningNode();
    if (!owner)
      break;
    n = owner;
  }
  return n;
}

std::string valueLabel(const Value* v) {
  return "%" + v->debugName();
}

} // namespace

namespace {
// Names `out` after `v` (`%x.1` gives `%x_contig`); values without a name of their own stay
// numbered.
void nameAfter(Value* out, const Value* v, const char* suffix) {
  std::string base = v->debugName();
  if (auto dot = base.find('.'); dot != std::string::npos)
    base = base.substr(0, dot);
  if (!base.empty() && !std::isdigit(static_cast<unsigned char>(base[0])))
    out->setDebugName(base + suffix);
}
} // namespace

Value* insertContiguous(Value* value, Node* before, Node* source) {
  torch::jit::Graph* graph = value->owningGraph();
  Node* at = liftToBlockOf(before, value);
  torch::jit::WithInsertPoint guard(at);
  Value* converted = graph->insert(c10::aten::contiguous, {value});
  converted->node()->setSourceRange(source->sourceRange());
  converted->node()->setScope(source->scope());
  converted->setType(value->type());
  nameAfter(converted, value, "_contig");
  return converted;
}

namespace {

class Applier {
public:
  Applier(const std::shared_ptr<torch::jit::Graph>& graph, const formats::Schedule& schedule,
          const ApplyOptions& options)
      : graph_(graph), schedule_(schedule), options_(options), index_(*graph),
        mutation_(graph, options.module) {
    for (const auto& op : schedule.ops)
      ops_by_id_[op.id] = &op;
  }

  ApplyReport run() {
    ApplyReport report;
    // Conversions are inserted first and removed last, so no edit invalidates a node another
    // decision still has to find.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < schedule_.decisions.size(); ++i)
      if (schedule_.decisions[i].action != Action::Remove)
        order.push_back(i);
    for (std::size_t i = 0; i < schedule_.decisions.size(); ++i)
      if (schedule_.decisions[i].action == Action::Remove)
        order.push_back(i);
    for (std::size_t i : order) {
      const Decision& d = schedule_.decisions[i];
      if (d.action == Action::None || d.region)
        continue; // a region's decision is applyRegionDecisions'
      ApplyResult r;
      r.decision_index = i;
      r.action = d.action;
      r.anchor = d.anchor;
      if (d.action == Action::Remove)
        applyRemove(d, r);
      else if (d.action == Action::Sync || options_.async_as_sync)
        applySync(d, r);
      else
        applyAsync(d, r);
      report.results.push_back(std::move(r));
    }
    std::sort(report.results.begin(), report.results.end(),
              [](const ApplyResult& a, const ApplyResult& b) {
                return a.decision_index < b.decision_index;
              });
    return report;
  }

private:
  static void finish(ApplyResult& r, ApplyStatus s, std::string msg) {
    r.status = s;
    r.message = std::move(msg);
  }

  // The unique op at an anchor. When several match (should not happen: the ordinal is part of
  // the match), the one tie-break of both sides decides (formats::pickAmongMatches): a unique
  // line hint.
  Node* resolve(const Anchor& a, std::string* why) const {
    auto nodes = index_.findByAnchor(a);
    if (nodes.empty()) {
      *why = "no " + a.op + " at " + a.describe();
      return nullptr;
    }
    if (auto pick = formats::pickAmongMatches(nodes.size(), -1, a.line, [&](std::size_t i) {
          return index_.anchor(index_.opId(nodes[i])).line;
        }))
      return nodes[*pick];
    *why = std::to_string(nodes.size()) + " ops match " + a.describe();
    return nullptr;
  }

  // What a sync or async decision acts on: its value, the consumer inputs that read it
  // directly, and how many already read a converted copy (either form).
  struct Site {
    Node* producer = nullptr;
    Value* value = nullptr;
    std::vector<std::pair<Node*, std::size_t>> direct;
    std::size_t converted = 0;
  };

  static bool isAsyncStart(const Node* n) { return n->kind() == asyncSymbol(); }
  static c10::Symbol asyncSymbol() {
    static const c10::Symbol s = c10::Symbol::fromQualString("xalloc::contiguous_async");
    return s;
  }
  static c10::Symbol fastSyncSymbol() {
    static const c10::Symbol s = c10::Symbol::fromQualString("xalloc::contiguous");
    return s;
  }
  // `in` is a converted copy of `v`: aten::contiguous(v), xalloc::contiguous(v), or aten::wait
  // on xalloc::contiguous_async(v).
  static bool isConvertedCopyOf(const Value* in, const Value* v) {
    const Node* n = in->node();
    if (isRowMajorContiguousCall(n) || n->kind() == fastSyncSymbol())
      return n->input(0) == v;
    if (n->kind() == c10::aten::wait && !n->inputs().empty()) {
      const Node* start = n->input(0)->node();
      return isAsyncStart(start) && start->input(0) == v;
    }
    return false;
  }

  bool findSite(const Decision& d, ApplyResult& r, Site& site) {
    std::string why;
    Node* producer = resolve(d.anchor, &why);
    if (!producer) {
      finish(r, ApplyStatus::NotFound, "producer not found: " + why);
      return false;
    }
    if (d.output_index < 0 ||
        static_cast<std::size_t>(d.output_index) >= producer->outputs().size()) {
      finish(r, ApplyStatus::Skipped, "producer has no output " + std::to_string(d.output_index));
      return false;
    }
    Value* v = producer->output(static_cast<std::size_t>(d.output_index));
    if (!v->type()->cast<c10::TensorType>()) {
      finish(r, ApplyStatus::Skipped, valueLabel(v) + " is not a tensor");
      return false;
    }
    site.producer = producer;
    site.value = v;
    if (d.target == formats::LayoutTarget::Contiguous && writesRowMajorItself(producer)) {
      finish(r, ApplyStatus::AlreadyApplied,
             std::string(producer->kind().toQualString()) +
                 " already writes its output row-major itself");
      return false;
    }
    for (std::int64_t cid : d.consumers) {
      auto it = ops_by_id_.find(cid);
      if (it == ops_by_id_.end()) {
        finish(r, ApplyStatus::Skipped,
               "consumer op " + std::to_string(cid) + " is not in the schedule's ops");
        return false;
      }
      Node* c = resolve(it->second->anchor, &why);
      if (!c) {
        finish(r, ApplyStatus::NotFound, "consumer not found: " + why);
        return false;
      }
      bool reads = false;
      for (std::size_t i = 0; i < c->inputs().size(); ++i) {
        Value* in = c->input(i);
        if (in == v) {
          site.direct.emplace_back(c, i);
          reads = true;
        } else if (isConvertedCopyOf(in, v)) {
          ++site.converted;
          reads = true;
        }
      }
      if (!reads) {
        finish(r, ApplyStatus::Skipped,
               it->second->kind + " at " + it->second->anchor.describe() + " does not read " +
                   valueLabel(v));
        return false;
      }
      if (c->kind() == c10::aten::contiguous) {
        finish(r, ApplyStatus::Skipped, "a consumer is itself a conversion");
        return false;
      }
    }
    if (site.direct.empty()) {
      finish(r, site.converted > 0 ? ApplyStatus::AlreadyApplied : ApplyStatus::Skipped,
             site.converted > 0 ? "consumers already read a contiguous copy"
                                : "no consumers listed");
      return false;
    }
    if (mutation_.hasWriters(v)) {
      finish(r, ApplyStatus::Skipped,
             valueLabel(v) + " is written in place; a copy would change what the write affects");
      return false;
    }
    return true;
  }

  Node* firstConsumer(const Site& site) const {
    Node* first = site.direct.front().first;
    for (const auto& [c, i] : site.direct)
      if (liftToBlockOf(c, site.value)->isBefore(liftToBlockOf(first, site.value)))
        first = c;
    return first;
  }

  void applySync(const Decision& d, ApplyResult& r) {
    Site site;
    if (!findSite(d, r, site))
      return;
    if (isConstantTensor(site.value)) {
      auto now = evaluateConstant(site.value);
      if (now && now->is_contiguous())
        return finish(r, ApplyStatus::AlreadyApplied,
                      "the constant is already stored in the layout its consumers read");
      if (foldSync(site, r))
        return;
    }
    if (d.fused_template_input && fuseSync(site, *d.fused_template_input, r))
      return;
    Node* first = firstConsumer(site);
    // The fast form converts with the runtime's kernel (xalloc::contiguous), the portable one
    // with aten::contiguous.
    const bool fast = !options_.async_as_sync;
    Value* cv = fast ? insertFastContiguous(site.value, first, site.producer)
                     : insertContiguous(site.value, first, site.producer);
    for (const auto& [c, i] : site.direct)
      c->replaceInput(i, cv);
    finish(r, ApplyStatus::Applied,
           std::string("inserted ") + (fast ? "xalloc" : "aten") + "::contiguous(" +
               valueLabel(site.value) + ") before " + first->kind().toQualString() + "; " +
               std::to_string(site.direct.size()) + " input(s) rewired");
  }

  // The producer writes the value row-major itself (its out variant into a row-major buffer):
  // only when the listed consumers are all that read it, since every reader then sees the new
  // layout, and the producer makes nothing else.
  bool fuseSync(const Site& site, std::int64_t template_input, ApplyResult& r) {
    if (site.direct.size() != site.value->uses().size() || site.producer->outputs().size() != 1 ||
        mutation_.hasWriters(site.value))
      return false;
    const std::string op = site.producer->kind().toQualString();
    const std::string label = valueLabel(site.value);
    if (!fuseIntoProducer(site.producer, static_cast<std::size_t>(template_input)))
      return false;
    finish(r, ApplyStatus::Applied,
           op + " writes " + label + " row-major itself (its out variant into a row-major " +
               "buffer): no separate conversion");
    return true;
  }

  // A value computed from constants alone (a frozen model's weight, transposed): its base
  // constant is stored, once, in the layout that makes the value contiguous, and nothing
  // converts per call. Only when the listed consumers are all that read it: every reader sees
  // the new layout.
  bool foldSync(const Site& site, ApplyResult& r) {
    if (site.direct.size() != site.value->uses().size())
      return false;
    auto relaid = relayoutForContiguous(site.value);
    if (!relaid)
      return false;
    // Down the chain to the constant; `link` reads it (none when the value is the constant).
    Value* base = site.value;
    Node* link = nullptr;
    while (base->node()->kind() != c10::prim::Constant) {
      link = base->node();
      base = link->input(0);
    }
    Value* stored;
    {
      torch::jit::WithInsertPoint guard(graph_->block()->nodes().front());
      stored = graph_->insertConstant(*relaid);
    }
    // Typed with its strides, so the diff shows the new layout (a loaded model says Tensor).
    stored->setType(c10::TensorType::create(*relaid));
    nameAfter(stored, base, "_relaid");
    if (link) {
      link->replaceInput(0, stored);
    } else {
      for (const auto& [c, i] : site.direct)
        c->replaceInput(i, stored);
    }
    base->node()->destroy(); // read by the chain alone (isConstantTensor)
    finish(r, ApplyStatus::Applied,
           "stored the constant " + valueLabel(site.value) + " is made from in the layout that " +
               "makes it contiguous: converted once, now, not on every call");
    return true;
  }

  static Value* insertFastContiguous(Value* value, Node* before, Node* source) {
    torch::jit::Graph* graph = value->owningGraph();
    Node* n = graph->create(fastSyncSymbol(), {value}, 1);
    n->output()->setType(value->type());
    n->setSourceRange(source->sourceRange());
    n->setScope(source->scope());
    n->insertBefore(liftToBlockOf(before, value));
    nameAfter(n->output(), value, "_contig");
    return n->output();
  }

  // The fast form: the conversion starts right after the producer on a side worker
  // (xalloc::contiguous_async), and the first consumer waits for it (aten::wait).
  void applyAsync(const Decision& d, ApplyResult& r) {
    Site site;
    if (!findSite(d, r, site))
      return;
    Node* first = firstConsumer(site);
    torch::jit::Graph* graph = site.value->owningGraph();
    Node* start = graph->create(asyncSymbol(), {site.value}, 1);
    start->output()->setType(c10::FutureType::create(site.value->type()));
    start->setSourceRange(site.producer->sourceRange());
    start->setScope(site.producer->scope());
    start->insertAfter(site.value->node()->kind() == c10::prim::Param ? graph->block()->param_node()
                                                                      : site.value->node());
    Node* wait = graph->create(c10::aten::wait, {start->output()}, 1);
    wait->output()->setType(site.value->type());
    wait->setSourceRange(site.producer->sourceRange());
    wait->setScope(site.producer->scope());
    wait->insertBefore(liftToBlockOf(first, site.value));
    nameAfter(start->output(), site.value, "_future");
    nameAfter(wait->output(), site.value, "_contig");
    for (const auto& [c, i] : site.direct)
      c->replaceInput(i, wait->output());
    finish(r, ApplyStatus::Applied,
           "started xalloc::contiguous_async(" + valueLabel(site.value) +
               ") after its producer; aten::wait before " + first->kind().toQualString() + "; " +
               std::to_string(site.direct.size()) + " input(s) rewired");
  }

  void applyRemove(const Decision& d, ApplyResult& r) {
    std::string why;
    auto nodes = index_.findByAnchor(d.anchor);
    if (nodes.empty())
      return finish(r, ApplyStatus::NotFound,
                    "no conversion at " + d.anchor.describe() + " (already removed?)");
    Node* c = resolve(d.anchor, &why);
    if (!c)
      return finish(r, ApplyStatus::Skipped, why);
    if (removed_.count(c)) // destroyed already: compare the pointer, never dereference it
      return finish(r, ApplyStatus::AlreadyApplied, "removed by an earlier decision");
    if (!isRowMajorContiguousCall(c))
      return finish(r, ApplyStatus::Skipped,
                    c->kind().toQualString() + std::string(" at ") + d.anchor.describe() +
                        " is not a plain aten::contiguous");
    Value* src = c->input(0);
    if (d.input_anchor) {
      auto pid = index_.opId(src->node());
      if (pid < 0 || !index_.anchor(pid).sameSite(*d.input_anchor))
        return finish(r, ApplyStatus::NotFound,
                      "the conversion at " + d.anchor.describe() +
                          " reads a different value than the profiled one (already removed?)");
    }
    if (mutation_.hasWriters(src) || mutation_.hasWriters(c->output()))
      return finish(r, ApplyStatus::Skipped,
                    "the conversion's input or output is written in place; removing it would "
                    "change what the write affects");
    if (d.fused_template_input) {
      // The producer writes row-major itself; the conversion, now of a contiguous tensor, goes.
      Node* producer = src->node();
      if (src->uses().size() != 1 || producer->outputs().size() != 1)
        return finish(r, ApplyStatus::Skipped,
                      "the conversion's input is read by other ops too: its producer cannot "
                      "write it row-major for this conversion alone");
      const std::string op = producer->kind().toQualString();
      Value* fused = fuseIntoProducer(producer, static_cast<std::size_t>(*d.fused_template_input));
      if (!fused)
        return finish(r, ApplyStatus::Skipped,
                      op + " has no out variant to write " + valueLabel(src) + " row-major");
      c->output()->replaceAllUsesWith(fused);
      removed_.insert(c);
      c->destroy();
      return finish(r, ApplyStatus::Applied,
                    op + " writes " + valueLabel(fused) +
                        " row-major itself; the aten::contiguous after it is removed");
    }
    for (const torch::jit::Use& u : c->output()->uses())
      if (u.user->kind() == c10::aten::view)
        return finish(r, ApplyStatus::Skipped,
                      "aten::view reads the conversion and needs a contiguous input");
    c->output()->replaceAllUsesWith(src);
    removed_.insert(c);
    c->destroy();
    finish(r, ApplyStatus::Applied, "removed aten::contiguous(" + valueLabel(src) + ")");
  }

  std::shared_ptr<torch::jit::Graph> graph_;
  const formats::Schedule& schedule_;
  ApplyOptions options_;
  GraphIndex index_;
  MutationInfo mutation_;
  std::map<std::int64_t, const formats::Op*> ops_by_id_;
  std::set<const Node*> removed_;
};

} // namespace

ApplyReport applySchedule(const std::shared_ptr<torch::jit::Graph>& graph,
                          const formats::Schedule& schedule, const ApplyOptions& options) {
  return Applier(graph, schedule, options).run();
}

} // namespace xalloc::tspass
