// applyRegionDecisions: a schedule's region decisions found again in a frozen graph by their
// ops' anchors (marked, so other edits in between cannot lose them) and applied, each reported
// like a value decision.
#include <map>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/error.h"
#include "xalloc/tspass/fusions.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

namespace {

c10::Symbol tag() {
  return c10::Symbol::attr("xalloc_region");
}

std::string counts(const RegionEdit& e) {
  std::string s;
  auto add = [&](std::int64_t n, const char* what) {
    if (n > 0)
      s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(e.entry_conversions, "entry conversion(s)");
  add(e.exit_conversions, "exit conversion(s)");
  add(e.weights_relaid, "weight(s) re-laid");
  add(e.packed, "convolution(s), linear(s) or attention block(s) packed");
  add(e.fused, "activation(s) fused");
  add(e.blocked_ops, "op(s) on blocked tensors");
  add(e.pools, "max pooling(s) without indices");
  add(e.removed_conversions, "row-major conversion(s) of the entries removed");
  return s;
}

formats::RegionCandidate candidateOf(const formats::Decision& d) {
  XALLOC_EXPECTS(d.region_layout, "a region decision names its layout");
  return formats::candidateOf(*d.region_layout);
}

std::string nameOf(const formats::Decision& d) {
  return "region " + std::to_string(d.region->id) + " as " + candidateOf(d).name();
}

ApplyResult resultFor(const formats::Schedule& s, std::size_t i) {
  ApplyResult r;
  r.decision_index = i;
  r.action = s.decisions[i].action;
  r.anchor = s.decisions[i].anchor;
  return r;
}

} // namespace

MarkedRegions markRegionDecisions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                                  const std::vector<std::optional<int>>& input_ranks, bool frozen,
                                  bool fast_form) {
  MarkedRegions out;
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < schedule.decisions.size(); ++i) {
    const auto& d = schedule.decisions[i];
    if (d.region && d.action == formats::Action::Sync)
      todo.push_back(i);
  }
  if (todo.empty())
    return out;
  auto regions = findLayoutRegions(graph, input_ranks);
  GraphIndex index(graph);
  for (std::size_t i : todo) {
    const auto& d = schedule.decisions[i];
    ApplyResult r = resultFor(schedule, i);
    const LayoutRegion* found = nullptr;
    for (const auto& g : regions)
      if (sameRegion(g, index, *d.region))
        found = &g;
    if (!frozen) {
      r.status = ApplyStatus::Skipped;
      r.message = nameOf(d) + " needs the model frozen (xrewrite --freeze): its weights are "
                              "re-laid once, as constants";
    } else if (candidateOf(d).needsRuntime() && !fast_form) {
      r.status = ApplyStatus::Skipped;
      r.message = nameOf(d) + " needs the runtime's ops: write the fast form (--form fast)";
    } else if (regionAlreadyLaidOut(found, index, *d.region)) {
      r.status = ApplyStatus::AlreadyApplied;
      r.message = nameOf(d) + ": it runs in another layout already";
    } else if (!found) {
      r.status = ApplyStatus::NotFound;
      r.message = nameOf(d) + ": no region of this graph has its " +
                  std::to_string(d.region->nodes.size()) + " ops";
    } else {
      for (torch::jit::Node* n : found->nodes)
        n->i_(tag(), static_cast<std::int64_t>(i));
      out.marked.push_back(i);
      continue;
    }
    out.report.results.push_back(std::move(r));
  }
  return out;
}

ApplyReport applyMarkedRegions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                               const MarkedRegions& marked,
                               const std::set<std::string>& fusions_off) {
  // The marked ops of each decision, in graph order, and every mark cleared.
  // (An attention block's op sits in a branch: every block is searched, in graph order.)
  std::map<std::int64_t, LayoutRegion> by_decision;
  for (torch::jit::Node* n : allNodes(graph))
    if (n->hasAttribute(tag())) {
      by_decision[n->i(tag())].nodes.push_back(n);
      n->removeAttribute(tag());
    }
  ApplyReport report = marked.report;
  bool runtime = false; // a region runs the runtime's ops
  for (std::size_t i : marked.marked) {
    const auto& d = schedule.decisions[i];
    ApplyResult r = resultFor(schedule, i);
    auto it = by_decision.find(static_cast<std::int64_t>(i));
    if (it == by_decision.end()) {
      r.status = ApplyStatus::Skipped;
      r.message = nameOf(d) + ": its ops were rewritten by another decision";
      report.results.push_back(std::move(r));
      continue;
    }
    LayoutRegion& g = it->second;
    g.convolutions = d.region->convolutions;
    g.rank = d.region->convolutions == 0 ? 0 : candidateOf(d).traits().fits(5) ? 5 : 4;
    RegionEdit e;
    try {
      e = applyRegionLayout(graph, g, candidateOf(d));
    } catch (const std::exception& ex) { // a weight the runtime refuses to pack, say
      const std::string what = ex.what();
      e.applied = false;
      e.message = "cannot be rewritten: " + what.substr(0, what.find('\n'));
    }
    r.status = e.applied ? ApplyStatus::Applied : ApplyStatus::Skipped;
    r.message = nameOf(d) + ": " + (e.applied ? counts(e) : e.message);
    report.results.push_back(std::move(r));
    runtime = runtime || (e.applied && candidateOf(d).needsRuntime());
  }
  if (runtime)
    report.fusions = runFusions(graph, fusions_off);
  return report;
}

ApplyReport applyRegionDecisions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                                 const std::vector<std::optional<int>>& input_ranks, bool frozen,
                                 bool fast_form, const std::set<std::string>& fusions_off) {
  return applyMarkedRegions(graph, schedule,
                            markRegionDecisions(graph, schedule, input_ranks, frozen, fast_form),
                            fusions_off);
}

} // namespace xalloc::tspass
