// applyRegionDecisions: a schedule's region decisions found again in a frozen graph by their
// ops' anchors and applied, each reported like a value decision.
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

namespace {
std::string counts(const RegionEdit& e) {
  std::string s;
  auto add = [&](std::int64_t n, const char* what) {
    if (n > 0)
      s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(e.entry_conversions, "entry conversion(s)");
  add(e.exit_conversions, "exit conversion(s)");
  add(e.weights_relaid, "weight(s) re-laid");
  add(e.packed, "convolution(s) packed");
  add(e.fused, "activation(s) fused");
  add(e.blocked_ops, "op(s) on blocked tensors");
  return s;
}
} // namespace

ApplyReport applyRegionDecisions(torch::jit::Graph& graph, const formats::Schedule& schedule,
                                 const std::vector<std::optional<int>>& input_ranks, bool frozen,
                                 bool fast_form) {
  ApplyReport report;
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < schedule.decisions.size(); ++i) {
    const auto& d = schedule.decisions[i];
    if (d.region && d.action == formats::Action::Sync)
      todo.push_back(i);
  }
  if (todo.empty())
    return report;
  auto regions = findLayoutRegions(graph, input_ranks);
  GraphIndex index(graph);
  // Found first, all of them, before any edit renumbers the graph.
  std::vector<LayoutRegion*> found(todo.size(), nullptr);
  std::vector<bool> laid_out(todo.size(), false);
  for (std::size_t k = 0; k < todo.size(); ++k) {
    const auto& ref = *schedule.decisions[todo[k]].region;
    for (auto& r : regions)
      if (sameRegion(r, index, ref))
        found[k] = &r;
    laid_out[k] = found[k] ? regionReadsChannelsLast(*found[k]) : regionAlreadyLaidOut(index, ref);
  }
  for (std::size_t k = 0; k < todo.size(); ++k) {
    const auto& d = schedule.decisions[todo[k]];
    ApplyResult r;
    r.decision_index = todo[k];
    r.action = d.action;
    r.anchor = d.anchor;
    formats::RegionCandidate c;
    c.target = d.target;
    c.packed = d.packed;
    const std::string name = "region " + std::to_string(d.region->id) + " as " + c.name();
    if (!frozen) {
      r.status = ApplyStatus::Skipped;
      r.message = name + " needs the model frozen (xrewrite --freeze): its weights are re-laid "
                         "once, as constants";
    } else if (c.needsRuntime() && !fast_form) {
      r.status = ApplyStatus::Skipped;
      r.message = name + " needs the runtime's ops: write the fast form (--form fast)";
    } else if (laid_out[k]) {
      r.status = ApplyStatus::AlreadyApplied;
      r.message = name + ": its convolutions run in another layout already";
    } else if (!found[k]) {
      r.status = ApplyStatus::NotFound;
      r.message = name + ": no region of this graph has its " +
                  std::to_string(d.region->nodes.size()) + " ops";
    } else {
      const RegionEdit e = applyRegionLayout(graph, *found[k], c);
      r.status = e.applied ? ApplyStatus::Applied : ApplyStatus::Skipped;
      r.message = e.applied ? name + ": " + counts(e) : name + ": " + e.message;
    }
    report.results.push_back(std::move(r));
  }
  return report;
}

} // namespace xalloc::tspass
