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
  // What kept the conversion, then what the fusion gains.
  formats::NamedValues v = k.kept.values;
  v.push_back({"kept_rule", k.kept.rule});
  v.push_back({"kept_blocker", formats::toString(k.kept.blocker)});
  v.push_back({"fused_op", k.site.input->producer_fusion->op});
  v.push_back({"input", k.site.input->name});
  v.push_back({"fusion_saving_ms", k.gain});
  v.push_back({"fusion_margin_ms", k.margin});
  return Verdict{formats::Action::Remove, formats::Blocker::None, std::move(v), false,
                 Carries::Fused};
}

} // namespace xalloc::scheduler::rules
