// Consumer re-runs for libxprof_hook.so (see replay.h).
#include "replay.h"

#include <mutex>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "xalloc/profiler/consumer_timing.h"
#include "xalloc/profiler/measure.h"

namespace xprof_hook {

namespace prof = xalloc::profiler;

std::vector<std::size_t> writtenArgs(const at::RecordFunction& fn) {
  std::vector<std::size_t> out;
  auto name = fn.operator_name();
  auto op = name ? c10::Dispatcher::singleton().findOp(*name) : c10::nullopt;
  if (!op)
    return out;
  const auto& args = op->schema().arguments();
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].alias_info() && args[i].alias_info()->isWrite())
      out.push_back(i);
  return out;
}

void replayConsumer(const at::RecordFunction& fn, c10::ArrayRef<const c10::IValue> inputs,
                    std::size_t arg, const at::Tensor& t, const at::Tensor& other,
                    bool to_contiguous, const ReplayOptions& o, xalloc::formats::ConsumerTiming& c,
                    std::vector<c10::IValue>* swapped_out) {
  if (!other.defined()) {
    c.note = "could not make a contiguous copy";
    return;
  }
  if (!o.enabled) {
    c.note = "consumers not re-run (--no-consumers)";
    return;
  }
  auto name = fn.operator_name();
  auto op = name ? c10::Dispatcher::singleton().findOp(*name) : c10::nullopt;
  if (!op) {
    c.note = "not a dispatcher op; not re-run";
    return;
  }
  if (!writtenArgs(fn).empty()) {
    c.note = "mutates an input or has side effects; not re-run";
    return;
  }
  if (op->schema().is_vararg() || op->schema().arguments().size() != inputs.size()) {
    c.note = "arguments not recorded in full; not re-run";
    return;
  }
  auto stackWith = [&](const at::Tensor& x) {
    torch::jit::Stack s(inputs.begin(), inputs.end());
    if (s[arg].isTensor()) {
      s[arg] = x;
    } else {
      auto list = s[arg].toTensorVector();
      for (auto& e : list)
        if (e.unsafeGetTensorImpl() == t.unsafeGetTensorImpl())
          e = x;
      s[arg] = c10::IValue(list);
    }
    return s;
  };
  const torch::jit::Stack as_is = stackWith(t), swapped = stackWith(other);
  tl_depth += 1;
  at::RecordFunctionGuard off(false);
  at::NoGradGuard no_grad;
  // Re-running an op must not move the program's random numbers.
  auto gen = at::detail::getDefaultCPUGenerator();
  at::Tensor rng;
  {
    std::lock_guard<std::mutex> g(gen.mutex());
    rng = gen.get_state();
  }
  auto run = [&](const torch::jit::Stack& in) {
    torch::jit::Stack s = in;
    op->callBoxed(&s);
    return s;
  };
  try {
    if (prof::compareLayouts([&](bool swap) { return run(swap ? swapped : as_is); }, to_contiguous,
                             c, swapped_out))
      prof::setTimings(prof::timeInterleaved([&] { (void)run(as_is); }, [&] { (void)run(swapped); },
                                             o.warmup, o.repeats),
                       to_contiguous, c);
  } catch (const std::exception&) {
    c.note = "failed when timed";
  }
  {
    std::lock_guard<std::mutex> g(gen.mutex());
    gen.set_state(rng);
  }
  tl_depth -= 1;
}

} // namespace xprof_hook
