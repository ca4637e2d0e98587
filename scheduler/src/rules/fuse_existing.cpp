// fuse-existing: an existing row-major conversion the remove rules keep, whose input only it
// reads and a pointwise producer makes: when the producer writing row-major itself was measured
// faster than the producer and this conversion, by more than the margin and within the
// tolerance, the conversion goes and the producer writes what its readers read. Their input
// keeps its layout and (within the tolerance) its values, so nothing they do changes.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> fuseExisting(const Kept& k) {
  if (!k.fusible || !k.within_tolerance || !(k.gain > k.margin))
    return std::nullopt;
  const formats::ProducerFusion& f = *k.site.input->producer_fusion;
  return Verdict{formats::Action::Remove,
                 "fused into its producer: " + f.op + " writes " + k.site.input->name +
                     " row-major itself, measured " + fmtMs(k.gain) +
                     " faster than it and this conversion, which goes (" + k.kept.reason + ")",
                 false, Carries::Fused};
}

} // namespace xalloc::scheduler::rules
