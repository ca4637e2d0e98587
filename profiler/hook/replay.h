// The ops libxprof_hook.so records: their tensor arguments, the arguments they write, our own
// ops run beside the program's, and consumer re-runs: an op the program called, run again through
// the dispatcher with one tensor argument as it is and in the other layout, interleaved and timed,
// outputs compared bit for bit. Mutating ops are not re-run and the default generator's state is
// restored, so the program's results and random numbers do not change.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include "xalloc/formats/profile.h"

#include "stacks.h"

namespace xprof_hook {

/// Calls `f` on each defined tensor of an argument (a tensor or a list of tensors).
template <typename F> void forEachTensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined())
      f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector())
      if (t.defined())
        f(t);
  }
}

/// The arguments an op writes to (`Tensor(a!) self`); none when it is not a dispatcher op.
std::vector<std::size_t> writtenArgs(const at::RecordFunction& fn);

/// Runs our own ops (never recorded as the program's), and swallows their failures.
template <typename F> bool guarded(F&& f) {
  tl_depth += 1;
  bool ok = true;
  {
    at::RecordFunctionGuard off(false);
    try {
      f();
    } catch (const std::exception&) {
      ok = false;
    }
  }
  tl_depth -= 1;
  return ok;
}

struct ReplayOptions {
  bool enabled = true; // false: --no-consumers
  int warmup = 2, repeats = 15;
};

/// Times the consumer `fn` with argument `arg` (the tensor `t`, or a list holding it) as it is
/// and as `other` (contiguous, or the source of the conversion that produced `t`), and fills
/// `c`; a note says why when it is not re-run. When `other` changes the layout of the op's
/// outputs, `swapped_out` (if given) gets the outputs `other` gives, to follow them downstream.
void replayConsumer(const at::RecordFunction& fn, c10::ArrayRef<const c10::IValue> inputs,
                    std::size_t arg, const at::Tensor& t, const at::Tensor& other,
                    bool to_contiguous, const ReplayOptions& o, xalloc::formats::ConsumerTiming& c,
                    std::vector<c10::IValue>* swapped_out = nullptr);

} // namespace xprof_hook
