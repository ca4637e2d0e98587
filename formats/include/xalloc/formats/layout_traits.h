// What the documents know of each region layout, without libtorch: its name, which regions it
// fits, whether it needs the runtime. One row per layout (layout_traits.cpp); the layout itself
// (how it is applied, how to tell it is applied already) is tspass's RegionLayout of
// the same name. The profiler's candidate list, the readers' validity checks and the names in
// reports all read this table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xalloc/formats/enums.h"

namespace xalloc::formats {

struct LayoutTraits {
  const char* name;    // "channels_last+packed": the name in reports and --show
  LayoutTarget target; // the memory format of its activations
  bool packed;         // weights packed for oneDNN, the next activation fused
  /// The region ranks it fits: 0 for a linear's region of its own, 4 and 5 for convolutions'.
  std::vector<int> ranks;
  bool needs_runtime; // inserts libxalloc_runtime.so's ops (the fast form only)
  bool needs_onednn;  // and the runtime must be built with oneDNN

  bool fits(int rank) const;
};

/// Every region layout, in the order the profiler tries them; [0] is row-major, the region as
/// it is.
const std::vector<LayoutTraits>& regionLayoutTraits();
/// The first row for (target, packed): the layout older documents (profile version 1, schedule
/// version 2) meant by the pair; nullptr when no layout is both.
const LayoutTraits* layoutTraits(LayoutTarget target, bool packed);
/// The row named `name`; nullptr when none is.
const LayoutTraits* layoutTraits(std::string_view name);
/// Every row's name, quoted and comma-separated: for messages.
std::string regionLayoutNames();

} // namespace xalloc::formats
