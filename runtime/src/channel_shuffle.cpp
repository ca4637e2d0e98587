// xalloc::channel_shuffle: ShuffleNet's channel shuffle (`x.view(b, g, c // g, h, w)`,
// `transpose(1, 2).contiguous()`, `view(b, -1, h, w)`) as xrewrite writes it after a
// channels-last region (tspass::shuffleChannelsInPlace): ATen's aten::channel_shuffle, which
// keeps a channels-last input channels-last and so spares the region its exit conversion, with
// the same elements. ATen 1.13 gives that op no derivative, so an input that wants gradients, and
// anything but a 4-D tensor whose channels the groups divide, takes the idiom's own ATen ops: the
// original's gradients and the original's errors.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "packed_checks.h"

namespace xalloc::runtime {

namespace {

at::Tensor channelShuffle(const at::Tensor& x, std::int64_t groups) {
  if (x.dim() == 4 && groups >= 1 && x.size(1) % groups == 0 && x.layout() == at::kStrided &&
      !detail::wantsGradient(x))
    return at::channel_shuffle(x, groups);
  const std::int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({b, groups, groups == 0 ? 0 : c / groups, h, w})
      .transpose(1, 2)
      .contiguous()
      .view({b, -1, h, w});
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("channel_shuffle(Tensor x, int groups) -> Tensor", channelShuffle);
}

} // namespace xalloc::runtime
