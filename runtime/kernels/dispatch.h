// The kernel library's CPU dispatch: one table of function pointers, filled once from CPUID
// (ONNX Runtime's MLAS_PLATFORM, PyTorch's DispatchStub), one row per CPU-specific kernel listed
// in kernels.def. A kernel file defines its variants; it never asks the CPU itself.
//
// XALLOC_CPU_ISA=avx512f|avx2|baseline caps what the table takes (as ATEN_CPU_CAPABILITY and
// DNNL_MAX_CPU_ISA do): the portable paths run on an AVX-512 machine, for a test or to rule a
// kernel out. It never raises the level above what the CPU runs.
#pragma once

#include <cstdint>
#include <type_traits>

namespace xalloc::runtime {

/// A 2-D max pooling's kernel, strides, padding, dilation and output size (pool_nhwc.cpp).
struct Pool2d {
  std::int64_t kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

/// Two sources' channels interleaved pixel by pixel (channel_shuffle.cpp): for each pixel p and
/// j < pairs, out[p * out_stride + 2j] = a[p * a_stride + j] and out[p * out_stride + 2j + 1] =
/// b[p * b_stride + j]. A channel shuffle of two groups is one (a and b the halves of a pixel).
struct PairInterleave {
  const float* a;
  const float* b;
  float* out;
  std::int64_t a_stride, b_stride, out_stride, pairs;
};

/// An activation the epilogue applies in place (epilogue.h): ATen's formula for each.
enum class Activation : int { None, Relu, Silu, Hardswish, Sigmoid, Relu6, Hardsigmoid };

/// A depthwise 2-D convolution of channels-last floats, one filter per channel
/// (depthwise_nhwc.cpp): input n x h x w x c, output n x oh x ow x c, weights kh x kw x c.
struct Depthwise2d {
  std::int64_t h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  const float* in;
  const float* weight;
  const float* bias; // c of them, or null
  float* out;
  Activation act = Activation::None; // applied to each block of output rows as it is written
};

/// A grouped 2-D convolution of channels-last floats (grouped_nhwc.cpp): input n x h x w x
/// (groups * ci), output n x oh x ow x (groups * co), co a multiple of 8, the weight in
/// groupedNhwcWeight's layout.
struct Grouped2d {
  std::int64_t h, w, groups, ci, co, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  const float* in;
  const float* weight;
  const float* bias; // groups * co of them, or null
  float* out;
  Activation act = Activation::None;
};

/// The instruction sets the kernels have variants for, lowest first.
enum class Isa : int { Baseline = 0, Avx2 = 1, Avx512f = 2 };

// `Fn<void(int)> f;` declares a function f of that type (a row's type is one macro argument).
template <class T> using Fn = T;

// The variants kernels.def names, declared here so that each kernel file's definition is checked
// against its row. Without x86-64 only the baseline ones exist.
#if defined(__x86_64__)
#define XALLOC_VARIANT_X86_1(name, type) Fn<type> name;
#else
#define XALLOC_VARIANT_X86_1(name, type)
#endif
#define XALLOC_VARIANT_X86_0(name, type)
#define XALLOC_VARIANT_1(name, type) Fn<type> name;
#define XALLOC_VARIANT_0(name, type)
#define KERNEL(name, type, avx512, avx2, base)                                                     \
  XALLOC_VARIANT_X86_##avx512(name##Avx512, type) XALLOC_VARIANT_X86_##avx2(name##Avx2, type)      \
      XALLOC_VARIANT_##base(name##Base, type)
#include "kernels.def"
#undef KERNEL

struct CpuKernels {
  Isa isa = Isa::Baseline; // the level the table was filled for
#define KERNEL(name, type, avx512, avx2, base) std::add_pointer_t<type> name = nullptr;
#include "kernels.def"
#undef KERNEL
};

/// The best level this CPU runs (CPUID), ignoring XALLOC_CPU_ISA.
Isa cpuIsa();

/// "avx512f", "avx2" or "baseline".
const char* isaName(Isa isa);

/// The process's table: filled on first use for min(cpuIsa(), XALLOC_CPU_ISA). A value of
/// XALLOC_CPU_ISA that names no level is an error (c10::Error) naming the variable, every call.
const CpuKernels& cpuKernels();

/// The table a CPU running `isa` gets, never above cpuIsa(): the tests compare the variants.
CpuKernels kernelsFor(Isa isa);

} // namespace xalloc::runtime
