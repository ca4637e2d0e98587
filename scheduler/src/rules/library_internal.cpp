// library-internal: in a program's profile a site is an expression of the program's own source.
// An op that libtorch runs for one of its calls (the `t` of the weight in torch::nn::Linear's
// forward) has no anchor: no source edit can convert it or remove it, so it stays `none`, and
// the reason says what it would have gained and where.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> libraryInternal(const Edited& e) {
  const formats::Decision& d = e.decision;
  if (e.profile.model.format != formats::ModelFormat::LibtorchProgram ||
      !e.producer.anchor.file.empty() || (d.action == formats::Action::None && !e.can_async))
    return std::nullopt;
  return blocked(formats::Blocker::NoSourceEdit,
                 {{"saving_ms", d.predicted_saving_ms},
                  {"cost_ms", d.predicted_cost_ms},
                  {"op", e.producer.kind},
                  {"source", e.producer.source.text},
                  {"location",
                   e.producer.source.file.empty() ? std::string() : e.producer.source.location()}});
}

} // namespace xalloc::scheduler::rules
