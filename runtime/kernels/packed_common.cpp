// What the packed ops share: the post-ops by name and the ATen ops they stand for, the bound on
// each op's cache of input shapes, and libtorch's oneDNN ops they run on (packed_onednn.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "packed_checks.h"
#include "xalloc/runtime/env_count.h"
#include "xalloc/runtime/packed.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "epilogue.h"
#include "packed_onednn.h"
#include "silu_pass.h"
#include "xalloc/torch_compat.h"
#ifdef _OPENMP
#include <omp.h>
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

bool hasPackedConv() {
  return detail::onednnOpsAvailable();
}

namespace detail {

namespace {
// libtorch's oneDNN ops: each under the first of its names this torch registers (a rename to
// onednn:: is under way upstream). Called boxed: their C++ signatures differ between releases,
// their schemas do not.
enum class Op { ReorderConv, ReorderLinear, Conv, ConvBinaryInto, Linear, Count };
struct OpName {
  const char* names[2];
  const char* overload;
};
constexpr OpName kOps[] = {
    {{"mkldnn::_reorder_convolution_weight", "onednn::_reorder_convolution_weight"}, ""},
    {{"mkldnn::_reorder_linear_weight", "onednn::_reorder_linear_weight"}, ""},
    {{"mkldnn::_convolution_pointwise", "onednn::_convolution_pointwise"}, ""},
    {{"mkldnn::_convolution_pointwise_", "onednn::_convolution_pointwise_"}, "binary"},
    {{"mkldnn::_linear_pointwise", "onednn::_linear_pointwise"}, ""},
};
static_assert(std::size(kOps) == static_cast<std::size_t>(Op::Count));

struct OpTable {
  std::optional<c10::OperatorHandle> ops[static_cast<std::size_t>(Op::Count)];
  bool all = true;
};

const OpTable& opTable() {
  static const OpTable table = [] {
    OpTable t;
    for (std::size_t i = 0; i < std::size(kOps); ++i) {
      for (const char* name : kOps[i].names) {
        t.ops[i] = c10::Dispatcher::singleton().findSchema({name, kOps[i].overload});
        if (t.ops[i])
          break;
      }
      t.all = t.all && t.ops[i].has_value();
    }
    return t;
  }();
  return table;
}

torch::jit::Stack call(Op op, torch::jit::Stack stack) {
  const auto& handle = opTable().ops[static_cast<std::size_t>(op)];
  TORCH_CHECK(handle, "xalloc: this torch registers no ",
              kOps[static_cast<std::size_t>(op)].names[0], " (a build without oneDNN?)");
  handle->callBoxed(stack);
  return stack;
}

// The activation as libtorch's oneDNN ops name it: attr, scalars, algorithm.
struct Attr {
  std::string name;
  c10::List<std::optional<at::Scalar>> scalars;
  std::optional<std::string> algorithm;
};
Attr attrOf(PostOp p) {
  Attr a;
  switch (p) {
  case PostOp::None:
    a.name = "none";
    break;
  case PostOp::Relu:
    a.name = "relu";
    break;
  case PostOp::Silu:
    a.name = "swish";
    break;
  case PostOp::Hardswish:
    a.name = "hardswish";
    break;
  case PostOp::Sigmoid:
    a.name = "sigmoid";
    break;
  case PostOp::Gelu:
    a.name = "gelu";
    a.algorithm = "none"; // erf, as aten::gelu's default
    break;
  case PostOp::Relu6:
    a.name = "hardtanh";
    a.scalars.push_back(at::Scalar(0.0));
    a.scalars.push_back(at::Scalar(6.0));
    break;
  case PostOp::Hardsigmoid:
    a.name = "hardsigmoid";
    break;
  case PostOp::Tanh:
    a.name = "tanh";
    break;
  }
  return a;
}

c10::IValue optionalTensor(const std::optional<at::Tensor>& t) {
  return t ? c10::IValue(*t) : c10::IValue();
}
c10::IValue optionalString(const std::optional<std::string>& s) {
  return s ? c10::IValue(*s) : c10::IValue();
}
} // namespace

bool onednnOpsAvailable() {
  return at::hasMKLDNN() && opTable().all;
}

at::Tensor reorderConvWeight(const at::Tensor& w, at::IntArrayRef padding, at::IntArrayRef stride,
                             at::IntArrayRef dilation, std::int64_t groups,
                             at::IntArrayRef input_sizes) {
  return call(Op::ReorderConv, {w.contiguous(), padding.vec(), stride.vec(), dilation.vec(), groups,
                                input_sizes.vec()})[0]
      .toTensor();
}

at::Tensor reorderLinearWeight(const at::Tensor& w, std::int64_t rows) {
  return call(Op::ReorderLinear, {w.contiguous(), rows})[0].toTensor();
}

at::Tensor convPointwise(const at::Tensor& x, const at::Tensor& w,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                         at::IntArrayRef stride, at::IntArrayRef dilation, std::int64_t groups,
                         PostOp post) {
  Attr a = attrOf(kernelPostOp(post));
  return call(Op::Conv, {x, w, optionalTensor(bias), padding.vec(), stride.vec(), dilation.vec(),
                         groups, a.name, a.scalars, optionalString(a.algorithm)})[0]
      .toTensor();
}

void convPointwiseAddInto(at::Tensor& out, const at::Tensor& x, const at::Tensor& w,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                          at::IntArrayRef stride, at::IntArrayRef dilation, std::int64_t groups,
                          PostOp post) {
  const PostOp k = kernelPostOp(post);
  if (k != PostOp::None && k != PostOp::Relu) {
    // The in-place form fuses relu at most: the sum in place, then the activation over it.
    convPointwiseAddInto(out, x, w, bias, padding, stride, dilation, groups, PostOp::None);
    out.copy_(applyPostOp(out, k));
    return;
  }
  Attr a = attrOf(k);
  call(Op::ConvBinaryInto,
       {out, x, w, optionalTensor(bias), padding.vec(), stride.vec(), dilation.vec(), groups,
        std::string("add"), at::Scalar(1.0),
        k == PostOp::None ? c10::IValue() : c10::IValue(a.name), a.scalars, c10::IValue()});
}

at::Tensor linearPointwise(const at::Tensor& x, const at::Tensor& w,
                           const std::optional<at::Tensor>& bias, PostOp post) {
  Attr a = attrOf(kernelPostOp(post));
  return call(Op::Linear,
              {x, w, optionalTensor(bias), a.name, a.scalars, optionalString(a.algorithm)})[0]
      .toTensor();
}

void activateInPlace(at::Tensor& y, PostOp p) {
  switch (kernelPostOp(p)) {
  case PostOp::None:
    return;
  case PostOp::Relu:
    at::relu_(y);
    return;
  case PostOp::Silu:
    at::silu_(y);
    return;
  case PostOp::Hardswish:
    at::hardswish_(y);
    return;
  case PostOp::Sigmoid:
    at::sigmoid_(y);
    return;
  case PostOp::Gelu:
    at::gelu_(y);
    return;
  case PostOp::Relu6:
    at::hardtanh_(y, 0, 6);
    return;
  case PostOp::Hardsigmoid:
    at::hardsigmoid_(y);
    return;
  case PostOp::Tanh:
    at::tanh_(y);
    return;
  }
}

namespace {

// The Fortran BLAS sgemm libtorch runs on (MKL's, exported by the wheel's libtorch_cpu; or the
// BLAS a build links it to), found through libtorch_cpu's handle so that a BLAS another library
// loaded (mathLibraries() loads OpenBLAS into the profiler) is never the one called.
using Sgemm = void(const char*, const char*, const int*, const int*, const int*, const float*,
                   const float*, const int*, const float*, const int*, const float*, float*,
                   const int*);
using MklLocalThreads = int(int);

struct TorchBlas {
  Sgemm* sgemm = nullptr;
  MklLocalThreads* local_threads = nullptr; // MKL_Set_Num_Threads_Local (C), where MKL it is
};

const TorchBlas& torchBlas() {
  static const TorchBlas blas = [] {
    TorchBlas b;
    if (std::getenv("XALLOC_NO_TILED_GEMM"))
      return b;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::get_num_threads), &info) == 0 || !info.dli_fname)
      return b;
    void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
      return b;
    b.sgemm = reinterpret_cast<Sgemm*>(dlsym(h, "sgemm_"));
    b.local_threads = reinterpret_cast<MklLocalThreads*>(dlsym(h, "MKL_Set_Num_Threads_Local"));
    dlclose(h); // the library stays: torch holds it
    return b;
  }();
  return blas;
}

bool rowMajorFloat(const at::Tensor& t, std::int64_t cols) {
  return t.scalar_type() == at::kFloat && t.dim() == 2 && t.size(1) == cols &&
         (t.size(1) <= 1 || t.stride(1) == 1) && t.stride(0) >= std::max<std::int64_t>(cols, 1);
}

// out rows [r0, r1) = x rows W^T through sgemm (column-major: out^T = W x^T), then the bias and
// the activation over those rows while they are in cache.
void gemmRows(const TorchBlas& blas, float* out, int ldo, const float* x, int ldx, const float* w,
              int n, int k, std::int64_t r0, std::int64_t r1, const float* bias, Activation a) {
  const int m = static_cast<int>(r1 - r0);
  const float one = 1.f, zero = 0.f;
  blas.sgemm("T", "N", &n, &m, &k, &one, w, &k, x + r0 * ldx, &ldx, &zero, out + r0 * ldo, &ldo);
  biasActivate(out + r0 * ldo, m, n, ldo, bias, a);
}

} // namespace

void gemmPointwise(at::Tensor& out2d, const at::Tensor& x2d, const at::Tensor& w2d,
                   const std::optional<at::Tensor>& bias, PostOp post) {
  const TorchBlas& blas = torchBlas();
  const std::int64_t m = x2d.size(0), k = x2d.size(1), n = w2d.size(0);
  const auto act = epilogueActivation(kernelPostOp(post));
  constexpr std::int64_t kInt = std::numeric_limits<int>::max();
  if (!blas.sgemm || !act || m == 0 || k == 0 || n == 0 || !rowMajorFloat(x2d, k) ||
      !rowMajorFloat(out2d, n) || !w2d.is_contiguous() || w2d.scalar_type() != at::kFloat ||
      (bias &&
       (!bias->is_contiguous() || bias->scalar_type() != at::kFloat || bias->numel() != n)) ||
      m > kInt || k > kInt || n > kInt || x2d.stride(0) > kInt || out2d.stride(0) > kInt) {
    if (bias)
      at::addmm_out(out2d, *bias, x2d, w2d.t());
    else
      at::mm_out(out2d, x2d, w2d.t());
    activateInPlace(out2d, post);
    return;
  }
  // Tiles of ~64 KiB of output (at least 64 rows, so that the GEMM keeps its speed), each one's
  // epilogue run as soon as it is written: ATen's addmm copies the bias into the whole output
  // first and its activation reads it all again. Measured at one thread (torch 2.14.1, AVX2):
  // EfficientNet-B0's 16->96 at 112x112 with SiLU, 2.10 ms through addmm and silu_, 1.53 tiled.
  const std::int64_t tile = std::max<std::int64_t>(64, (16384 / n) / 8 * 8);
  const std::int64_t tiles = (m + tile - 1) / tile;
  const float* x = x2d.data_ptr<float>();
  const float* w = w2d.data_ptr<float>();
  float* out = out2d.data_ptr<float>();
  const float* b = bias ? bias->data_ptr<float>() : nullptr;
  const auto ldx = static_cast<int>(x2d.stride(0)), ldo = static_cast<int>(out2d.stride(0));
  const int threads = static_cast<int>(std::min<std::int64_t>(
      packedThreads(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
                    at::get_num_threads()),
      tiles));
  auto tilesFrom = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t)
      gemmRows(blas, out, ldo, x, ldx, w, static_cast<int>(n), static_cast<int>(k), t * tile,
               std::min(m, (t + 1) * tile), b, *act);
  };
  if (threads <= 1) {
    // One thread: MKL's own team kept out of a product this size (its count restored after).
    const int saved = blas.local_threads ? blas.local_threads(1) : 0;
    tilesFrom(0, tiles);
    if (blas.local_threads)
      blas.local_threads(saved);
    return;
  }
  // Tiles shared among the threads; MKL runs each one on its caller alone (inside a parallel
  // region it does not start a team of its own).
  const OmpThreads team(threads);
  at::parallel_for(0, tiles, 1, tilesFrom);
}

bool linearGemmPays(double multiply_adds) {
  // Measured at one thread on this VM (torch 2.14.1, AVX2): 64x256 by 256 rows of 256, 126 us
  // through MKL against 185 through oneDNN's op; 49x384 by 1536, 1089 against 926.
  return multiply_adds < 8e6;
}

PostOp kernelPostOp(PostOp p) {
  return p == PostOp::Silu && hasSiluPass() ? PostOp::None : p;
}

void finishPostOp(PostOp p, at::Tensor& out) {
  if (kernelPostOp(p) != p)
    siluInPlace(out.data_ptr<float>(), out.numel());
}

bool sameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.is_mkldnn() != b.is_mkldnn() || a.sizes() != b.sizes())
    return false;
  if (!a.is_mkldnn())
    return a.is_same(b);
  const std::int64_t n = compat::mkldnnBytes(a);
  return n == compat::mkldnnBytes(b) && std::memcmp(compat::mkldnnData(a), compat::mkldnnData(b),
                                                    static_cast<std::size_t>(n)) == 0;
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

} // namespace detail

} // namespace xalloc::runtime
