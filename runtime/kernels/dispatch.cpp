// The CPU dispatch table (dispatch.h): for each row of kernels.def, the best variant a level runs.
#include "dispatch.h"

#include <cstdlib>
#include <cstring>

#include <c10/util/Exception.h>

namespace xalloc::runtime {

Isa cpuIsa() {
#if defined(__x86_64__)
  static const Isa isa = __builtin_cpu_supports("avx512f") ? Isa::Avx512f
                         : __builtin_cpu_supports("avx2")  ? Isa::Avx2
                                                           : Isa::Baseline;
  return isa;
#else
  return Isa::Baseline;
#endif
}

const char* isaName(Isa isa) {
  switch (isa) {
  case Isa::Avx512f:
    return "avx512f";
  case Isa::Avx2:
    return "avx2";
  case Isa::Baseline:
    break;
  }
  return "baseline";
}

CpuKernels kernelsFor(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(cpuIsa()))
    isa = cpuIsa();
  const int level = static_cast<int>(isa);
  CpuKernels t;
  t.isa = isa;
  // Best first: a row takes the first variant it has at or below the level.
#if defined(__x86_64__)
#define XALLOC_TAKE_X86_1(field, fn, at)                                                           \
  if (!t.field && level >= static_cast<int>(at))                                                   \
    t.field = &fn;
#else
#define XALLOC_TAKE_X86_1(field, fn, at)
#endif
#define XALLOC_TAKE_X86_0(field, fn, at)
#define XALLOC_TAKE_1(field, fn, at)                                                               \
  if (!t.field)                                                                                    \
    t.field = &fn;
#define XALLOC_TAKE_0(field, fn, at)
#define KERNEL(name, type, avx512, avx2, base)                                                     \
  XALLOC_TAKE_X86_##avx512(name, name##Avx512, Isa::Avx512f)                                       \
      XALLOC_TAKE_X86_##avx2(name, name##Avx2, Isa::Avx2)                                          \
          XALLOC_TAKE_##base(name, name##Base, Isa::Baseline)
#include "kernels.def"
#undef KERNEL
  return t;
}

namespace {

CpuKernels fromEnvironment() {
  Isa cap = Isa::Avx512f;
  if (const char* v = std::getenv("XALLOC_CPU_ISA"); v && *v) {
    if (std::strcmp(v, "avx512f") == 0)
      cap = Isa::Avx512f;
    else if (std::strcmp(v, "avx2") == 0)
      cap = Isa::Avx2;
    else if (std::strcmp(v, "baseline") == 0)
      cap = Isa::Baseline;
    else
      TORCH_CHECK(false, "XALLOC_CPU_ISA=", v, ": expected avx512f, avx2 or baseline");
  }
  return kernelsFor(cap);
}

} // namespace

const CpuKernels& cpuKernels() {
  static const CpuKernels table = fromEnvironment();
  return table;
}

} // namespace xalloc::runtime
