# The wheel's libtorch as x-allocator links it, after find_package(Torch) (the top-level build and
# runtime/gpu's standalone one):
#   xalloc::torch_cpu   libtorch without its CUDA half (torch_cpu and c10): every CPU part.
#   xalloc::torch_cuda  all of it (TORCH_LIBRARIES: libtorch_cuda, c10_cuda, the CUDA runtime),
#                       where the wheel has CUDA: only the runtime's CUDA backends
#                       (libxalloc_runtime_cuda.so and the GPU programs) link it, so that no CPU
#                       tool loads CUDA's libraries (0.3 s a process here).
add_library(xalloc_torch_cpu INTERFACE)
target_include_directories(xalloc_torch_cpu SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(xalloc_torch_cpu INTERFACE torch_cpu_library c10)
target_compile_options(xalloc_torch_cpu INTERFACE ${TORCH_CXX_FLAGS})
add_library(xalloc::torch_cpu ALIAS xalloc_torch_cpu)

set(XALLOC_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda)
  set(XALLOC_TORCH_HAS_CUDA ON)
  add_library(xalloc_torch_cuda INTERFACE)
  target_link_libraries(xalloc_torch_cuda INTERFACE ${TORCH_LIBRARIES})
  # libtorch_cuda's own dependencies (NCCL, cuDNN, ... of the wheel's nvidia-* packages) are
  # found at run time through its RPATH; at link time the linker must find the same ones, not
  # older copies under /usr/local/cuda.
  get_filename_component(site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB nvidia_lib_dirs LIST_DIRECTORIES true "${site}/nvidia/*/lib")
  foreach(d IN LISTS nvidia_lib_dirs)
    target_link_options(xalloc_torch_cuda INTERFACE "LINKER:-rpath-link,${d}")
  endforeach()
  add_library(xalloc::torch_cuda ALIAS xalloc_torch_cuda)
endif()
