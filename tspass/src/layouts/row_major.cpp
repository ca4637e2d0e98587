// Row-major: the region as it is. Nothing to apply; the first candidate of every region.
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {
class RowMajor final : public RegionLayout {
public:
  RowMajor() : RegionLayout("contiguous") {}
  RegionEdit apply(torch::jit::Graph&, LayoutRegion&) const override {
    RegionEdit e;
    e.message = "left as it is";
    return e;
  }
};
} // namespace

const RegionLayout& row_majorLayout() {
  static const RowMajor layout;
  return layout;
}

} // namespace xalloc::tspass
