// What the packed ops share: the post-ops by name and the ATen ops they stand for, the bound on
// each op's cache of input shapes, and (with oneDNN) the engine, streams, post-ops, scratchpads and
// weight packing of packed_dnnl.h.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include <ATen/ATen.h>

#include "packed_checks.h"
#include "xalloc/runtime/env_count.h"
#include "xalloc/runtime/packed.h"

#ifdef XALLOC_WITH_DNNL
#include "packed_dnnl.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#include "silu_pass.h"
#endif

namespace xalloc::runtime {

namespace {
constexpr std::pair<PostOp, const char*> kPostOps[] = {
    {PostOp::None, "none"},       {PostOp::Relu, "relu"},
    {PostOp::Silu, "silu"},       {PostOp::Hardswish, "hardswish"},
    {PostOp::Sigmoid, "sigmoid"}, {PostOp::Gelu, "gelu"},
    {PostOp::Relu6, "relu6"},     {PostOp::Hardsigmoid, "hardsigmoid"},
    {PostOp::Tanh, "tanh"}};

constexpr std::size_t kMaxCache = 4096;
// A thread's share of a packed op: ~10 us of a small convolution's work at one thread, where
// starting oneDNN's second thread (GNU OpenMP's team, 5-20 us on this 2-core VM) stops paying.
constexpr std::size_t kWorkPerThread = 150000;
std::atomic<std::size_t> g_cache_capacity{0}; // 0: not read from the environment yet
} // namespace

std::optional<PostOp> parsePostOp(const std::string& name) {
  for (const auto& [p, n] : kPostOps)
    if (name == n)
      return p;
  return std::nullopt;
}

const char* postOpName(PostOp p) {
  for (const auto& [q, n] : kPostOps)
    if (p == q)
      return n;
  return "?";
}

std::optional<PostOp> postOpForAten(const std::string& kind) {
  std::string k = kind;
  if (k.rfind("aten::", 0) != 0)
    return std::nullopt;
  k = k.substr(6);
  if (!k.empty() && k.back() == '_')
    k.pop_back();
  if (k == "relu6" || k == "hardtanh" || k == "none")
    return std::nullopt; // relu6 is hardtanh(0, 6): the caller checks its bounds
  return parsePostOp(k);
}

int packedThreads(double multiply_adds, int threads) {
  const auto per_thread = static_cast<double>(envCount(
      "XALLOC_PACKED_WORK_PER_THREAD", kWorkPerThread, 0, std::size_t{1} << 40, "multiply-adds"));
  const double most = std::max(threads, 1);
  if (per_thread <= 0)
    return static_cast<int>(most);
  return static_cast<int>(std::clamp(std::floor(multiply_adds / per_thread), 1.0, most));
}

std::size_t packedCacheCapacity() {
  std::size_t c = g_cache_capacity.load();
  if (c != 0)
    return c;
  c = envCount("XALLOC_PACKED_CACHE", 8, 1, kMaxCache, "input shapes");
  g_cache_capacity.store(c);
  return c;
}

void setPackedCacheCapacity(std::size_t shapes) {
  TORCH_CHECK(shapes >= 1 && shapes <= kMaxCache, "xalloc: a packed op keeps 1 to ", kMaxCache,
              " input shapes, not ", shapes);
  g_cache_capacity.store(shapes);
}

at::Tensor applyPostOp(const at::Tensor& y, PostOp p) {
  switch (p) {
  case PostOp::None:
    return y;
  case PostOp::Relu:
    return at::relu(y);
  case PostOp::Silu:
    return at::silu(y);
  case PostOp::Hardswish:
    return at::hardswish(y);
  case PostOp::Sigmoid:
    return at::sigmoid(y);
  case PostOp::Gelu:
    return at::gelu(y);
  case PostOp::Relu6:
    return at::hardtanh(y, 0, 6);
  case PostOp::Hardsigmoid:
    return at::hardsigmoid(y);
  case PostOp::Tanh:
    return at::tanh(y);
  }
  return y;
}

#ifdef XALLOC_WITH_DNNL

bool hasPackedConv() {
  return true;
}

namespace detail {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// The activation's post-ops, after a sum when the output holds a residual to add. A sum, not a
// binary add reading the residual where it is: with a binary post-op oneDNN 2.6 leaves its
// brgemm convolutions for older kernels, 8-28% slower on AVX-512 (ResNet's 3x3 convolutions).
dnnl::post_ops postOps(PostOp p, bool residual) {
  using A = dnnl::algorithm;
  dnnl::post_ops po;
  if (residual)
    po.append_sum(1.f);
  switch (p) {
  case PostOp::None:
    break;
  case PostOp::Relu:
    po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
    break;
  case PostOp::Silu:
    po.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f);
    break;
  case PostOp::Hardswish:
    po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
    break;
  case PostOp::Sigmoid:
    po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
    break;
  case PostOp::Gelu:
    po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
    break;
  case PostOp::Relu6:
    po.append_eltwise(1.f, A::eltwise_clip, 0.f, 6.f);
    break;
  case PostOp::Hardsigmoid: // relu6(x + 3) / 6
    po.append_eltwise(1.f, A::eltwise_linear, 1.f / 6.f, 0.5f);
    po.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
    break;
  case PostOp::Tanh:
    po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
    break;
  }
  return po;
}

PostOp kernelPostOp(PostOp p) {
  return p == PostOp::Silu && hasSiluPass() ? PostOp::None : p;
}

void finishPostOp(PostOp p, at::Tensor& out) {
  if (kernelPostOp(p) != p)
    siluInPlace(out.data_ptr<float>(), out.numel());
}

// Every primitive is made for a scratchpad the caller passes (never the library's own, which
// Debian's build shares between the threads that run one primitive).
dnnl::primitive_attr userScratchpad(PostOp p, bool residual) {
  dnnl::primitive_attr attr;
  attr.set_post_ops(postOps(kernelPostOp(p), residual));
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

#ifdef _OPENMP
OmpThreads::OmpThreads(int n) : saved_(omp_get_max_threads()) {
  if (n != saved_)
    omp_set_num_threads(n);
}
OmpThreads::~OmpThreads() {
  if (omp_get_max_threads() != saved_)
    omp_set_num_threads(saved_);
}
#else
OmpThreads::OmpThreads(int n) : saved_(n) {}
OmpThreads::~OmpThreads() = default;
#endif

void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratch,
             std::unordered_map<int, dnnl::memory> args) {
  const std::size_t bytes = scratch.get_size();
  if (bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratch, engine(), detail::threadScratch(bytes)));
  prim.execute(stream(), args);
  stream().wait();
}

// The dense weight `plain_md` (data at `data`) packed into `packed_md` once.
dnnl::memory packInto(const dnnl::memory::desc& plain_md, void* data,
                      const dnnl::memory::desc& packed_md) {
  dnnl::memory plain(plain_md, engine(), data);
  dnnl::memory packed(packed_md, engine());
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(plain, packed, attr);
  execute(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, packed}});
  return packed;
}

} // namespace detail

#else

struct PackedWeights {};

bool hasPackedConv() {
  return false;
}

#endif

} // namespace xalloc::runtime
