# The kernel library's sources, relative to runtime/kernels/: read by its CMakeLists.txt and by
# the kernels' AddressSanitizer build (tests/CMakeLists.txt, `make check`). One list.
set(XALLOC_KERNEL_SOURCES
  dispatch.cpp
  transpose.cpp
  channels_last.cpp
  finite_scan.cpp
  silu_pass.cpp
  pool_nhwc.cpp
  depthwise_nhwc.cpp
  epilogue.cpp
  grouped_nhwc.cpp
  channel_shuffle.cpp
  squeeze_excite.cpp
  blocked_ops.cpp
  packed_checks.cpp
  packed_common.cpp
  packed_conv.cpp
  packed_linear.cpp
  packed_attention.cpp
  packed_register.cpp)
# The kernels whose loops the compiler vectorizes at -O3 (-O2's cheap cost model leaves them
# scalar): the finite scans' integer max/or reductions, the pooling, SiLU, shuffle and
# squeeze-and-excitation loops.
set(XALLOC_KERNEL_O3_SOURCES finite_scan.cpp pool_nhwc.cpp silu_pass.cpp channel_shuffle.cpp
                             squeeze_excite.cpp depthwise_nhwc.cpp grouped_nhwc.cpp)
