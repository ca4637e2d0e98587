// The table of region layouts (layouts.def), and what every layout shares.
#include <algorithm>

#include "edit.h"
#include "xalloc/error.h"
#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

#define REGION_LAYOUT(file) const RegionLayout& file##Layout();
#include "layouts.def"
#undef REGION_LAYOUT

namespace {
const formats::LayoutTraits& traitsNamed(const char* name) {
  const formats::LayoutTraits* t = formats::layoutTraits(name);
  XALLOC_EXPECTS(t, std::string("region layout '") + name + "' has a row in layout_traits.cpp");
  return *t;
}
} // namespace

RegionLayout::RegionLayout(const char* name) : traits_(traitsNamed(name)) {}

bool RegionLayout::available() const {
  return !traits_.needs_onednn || runtime::hasPackedConv();
}

bool RegionLayout::readsEntriesIn(const LayoutRegion&) const {
  return false;
}

bool RegionLayout::appliedAt(const torch::jit::Node*, const std::string&) const {
  return false;
}

const std::vector<const RegionLayout*>& regionLayouts() {
  static const std::vector<const RegionLayout*> table = {
#define REGION_LAYOUT(file) &file##Layout(),
#include "layouts.def"
#undef REGION_LAYOUT
  };
  return table;
}

const RegionLayout& regionLayout(const formats::RegionCandidate& c) {
  const formats::LayoutTraits& t = c.traits();
  for (const RegionLayout* l : regionLayouts())
    if (&l->traits() == &t)
      return *l;
  throw Error(std::string("no region layout object for '") + t.name + "'");
}

std::vector<formats::RegionCandidate> regionCandidates(int rank) {
  std::vector<formats::RegionCandidate> out;
  for (const RegionLayout* l : regionLayouts())
    if (l->traits().fits(rank) && l->available())
      out.push_back(formats::candidateOf(l->traits()));
  return out;
}

RegionEdit applyRegionLayout(torch::jit::Graph& graph, LayoutRegion& r,
                             const formats::RegionCandidate& c) {
  const RegionLayout& layout = regionLayout(c);
  RegionEdit e;
  if (&layout == regionLayouts().front()) {
    e.message = "left as it is";
    return e;
  }
  if (!layout.traits().fits(r.rank)) {
    e.message =
        std::string(layout.traits().name) + " does not fit a " +
        (r.rank == 0 ? std::string("linear's region") : std::to_string(r.rank) + "-D region");
    return e;
  }
  if (!layout.available()) {
    e.message = "this runtime was built without oneDNN: no packed convolutions or linears";
    return e;
  }
  return layout.apply(graph, r);
}

bool regionAlreadyLaidOut(const LayoutRegion* found, const GraphIndex& index,
                          const formats::RegionRef& ref) {
  const auto& layouts = regionLayouts();
  if (found)
    return std::any_of(layouts.begin(), layouts.end(),
                       [&](const RegionLayout* l) { return l->readsEntriesIn(*found); });
  for (const auto& a : ref.nodes)
    for (const torch::jit::Node* now : index.findAt(a))
      for (const RegionLayout* l : layouts)
        if (l->appliedAt(now, a.op))
          return true;
  return false;
}

} // namespace xalloc::tspass
