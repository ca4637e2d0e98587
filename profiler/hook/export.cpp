// The recorded sites as the profile's ops and the hook's stacks (export.h).
#include "export.h"

#include <algorithm>

#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/measure.h"

namespace xprof_hook {

namespace fmt = xalloc::formats;
namespace prof = xalloc::profiler;

void summarizeSites(const std::vector<Site*>& order, const std::vector<Frame>& frames, int cores,
                    fmt::Profile& p, prof::HookRecord& record) {
  double clock = 0;
  for (Site* s : order) {
    fmt::Op op;
    op.id = s->id;
    op.kind = s->kind;
    const auto d = prof::summarize(s->ms);
    // The program's run is one run: a site's time is all its calls together, as a model's op
    // in a loop; the timeline (and its idle windows) is laid out per call.
    op.runs = std::max<std::int64_t>(1, s->calls);
    op.duration_ms = d.median_ms * static_cast<double>(op.runs);
    op.duration_spread_ms = d.iqr_ms * static_cast<double>(op.runs);
    op.noisy = prof::isNoisy(d);
    const double cpu = prof::summarize(s->cpu_ms).median_ms;
    op.utilization = d.median_ms > 0 ? std::clamp(cpu / (d.median_ms * cores), 0.0, 1.0) : 0.0;
    const double gap = s->gap_ms.empty() ? 0.0 : prof::summarize(s->gap_ms).median_ms;
    clock += op.id == 0 ? 0.0 : gap;
    op.start_ms = clock;
    clock += d.median_ms;
    op.inputs = s->inputs;
    op.outputs = s->outputs;
    p.ops.push_back(op);
    xalloc::profiler::HookRecord::Stack st;
    st.op = op.id;
    for (int f : s->frames)
      st.frames.push_back(
          {frames[static_cast<std::size_t>(f)].module, frames[static_cast<std::size_t>(f)].offset});
    st.calls = s->calls;
    st.recorded = s->recorded;
    st.shared_call = s->shared_call;
    record.stacks.push_back(std::move(st));
  }
}

} // namespace xprof_hook
