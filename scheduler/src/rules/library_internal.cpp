// library-internal: in a program's profile a site is an expression of the program's own source.
// An op that libtorch runs for one of its calls (the `t` of the weight in torch::nn::Linear's
// forward) has no anchor: no source edit can convert it or remove it, so it stays `none`, and
// the reason says what it would have gained and where.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<std::string> libraryInternal(const Edited& e) {
  const formats::Decision& d = e.decision;
  if (e.profile.model.format != formats::ModelFormat::LibtorchProgram ||
      !e.producer.anchor.file.empty() || (d.action == formats::Action::None && !e.can_async))
    return std::nullopt;
  std::string where = e.producer.source.file.empty() ? std::string("a call of the program's")
                                                     : e.producer.source.location();
  if (!e.producer.source.text.empty())
    where = "`" + e.producer.source.text + "` at " + where;
  const std::string gain = d.action == formats::Action::Remove
                               ? "removing it would save " + fmtMs(d.predicted_cost_ms) + " for " +
                                     fmtMs(d.predicted_saving_ms) + " more in its consumers"
                               : "a contiguous copy would save " + fmtMs(d.predicted_saving_ms) +
                                     " for a cost of " + fmtMs(d.predicted_cost_ms);
  return gain + ", but libtorch makes it (" + e.producer.kind + " inside " + where +
         "): no expression of the program's own to edit";
}

} // namespace xalloc::scheduler::rules
