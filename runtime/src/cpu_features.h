// Whether this CPU runs AVX-512F, asked once: the runtime's AVX-512 kernels (max pooling, the
// SiLU pass, the channels-last conversion, the channel shuffle) choose between them and their
// portable paths by it.
#pragma once

namespace xalloc::runtime {

inline bool hasAvx512f() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}

} // namespace xalloc::runtime
