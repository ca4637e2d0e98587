// The oneDNN pieces the packed ops share (packed_conv.cpp, packed_linear.cpp): the engine and each
// thread's stream, post-ops, primitives made for a scratchpad the caller passes, weights packed
// once and shared between the shapes whose kernels read one layout, a prepared primitive run.
// Built only with oneDNN (XALLOC_WITH_DNNL).
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "xalloc/runtime/packed.h"

namespace xalloc::runtime {

struct PackedWeights {
  dnnl::memory mem; // packed, owned by oneDNN
};

namespace detail {

dnnl::engine& engine();
dnnl::stream& stream();
/// The activation's post-ops, after a sum when the output holds a residual to add.
dnnl::post_ops postOps(PostOp p, bool residual);
/// The activation oneDNN's kernel applies for `p`: `p`, but none for SiLU where this CPU runs
/// the faster pass (silu_pass.h), which finishPostOp then applies.
PostOp kernelPostOp(PostOp p);
/// What kernelPostOp(p) left to do on the kernel's output.
void finishPostOp(PostOp p, at::Tensor& out);
/// Attributes for a primitive run with a scratchpad the caller passes, and the post-ops its
/// kernel applies for `p` (kernelPostOp).
dnnl::primitive_attr userScratchpad(PostOp p, bool residual = false);
/// Sets the calling thread's OpenMP thread count (oneDNN reads it when a primitive is made and
/// run) for its lifetime; a no-op without OpenMP.
class OmpThreads {
public:
  explicit OmpThreads(int n);
  ~OmpThreads();
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

private:
  int saved_;
};
/// Runs `prim` with `args` and a scratchpad of the calling thread's, and waits.
void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratch,
             std::unordered_map<int, dnnl::memory> args);
/// The dense weight `plain_md` (data at `data`) packed into `packed_md` once.
dnnl::memory packInto(const dnnl::memory::desc& plain_md, void* data,
                      const dnnl::memory::desc& packed_md);

// The packed copy among `list` whose layout is `md`, or a new one `make()` packs (and `list`
// pruned of copies no cached shape uses any more).
template <class Make>
std::shared_ptr<PackedWeights> sharedWeights(std::mutex& m,
                                             std::vector<std::weak_ptr<PackedWeights>>& list,
                                             const dnnl::memory::desc& md, Make make) {
  std::lock_guard<std::mutex> lock(m);
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }),
             list.end());
  for (const auto& w : list)
    if (auto s = w.lock(); s && s->mem.get_desc() == md)
      return s;
  auto s = std::make_shared<PackedWeights>(PackedWeights{make()});
  list.push_back(s);
  return s;
}

// The prepared primitive of a conv or linear on x, into out (its bias, if any, as it is stored;
// out holds the residual its sum post-op adds, when it has one).
template <class Prepared>
void runPrepared(const Prepared& p, const at::Tensor& x, const at::Tensor& out,
                 const c10::optional<at::Tensor>& bias) {
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(p.src, engine(), x.data_ptr())},
      {DNNL_ARG_WEIGHTS, p.weights->mem},
      {DNNL_ARG_DST, dnnl::memory(p.dst, engine(), out.data_ptr())}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, engine(), bias->data_ptr()));
  const OmpThreads team(p.threads);
  execute(p.primitive, p.scratch, std::move(args));
}

inline std::size_t liveCount(std::mutex& m, const std::vector<std::weak_ptr<PackedWeights>>& l) {
  std::lock_guard<std::mutex> lock(m);
  return static_cast<std::size_t>(
      std::count_if(l.begin(), l.end(), [](const auto& w) { return !w.expired(); }));
}

} // namespace detail
} // namespace xalloc::runtime
