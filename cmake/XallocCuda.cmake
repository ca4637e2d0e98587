# CUDA for the runtime's CUDA backend. Included from the top-level directory (CMake wants a
# language enabled in the highest directory common to the targets that compile or link it).
#   XALLOC_WITH_CUDA=ON: CUDA is enabled and required (a libtorch with CUDA).
#   otherwise: when nvcc and the toolkit are found, CUDA is enabled to build the CUDA
#   backends (XALLOC_CUDA_COMPILE_CHECK) into libxalloc_runtime_cuda.so, against the wheel's CUDA
#   libtorch (runtime/CMakeLists.txt).
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# The architectures come from torch's TORCH_CUDA_ARCH_LIST (CMakeLists.txt), which ignores
# CMake's own. C++20, as torch's headers need: CMake 3.25 does not know nvcc's flag for it.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES OFF)
endif()
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
set(XALLOC_CUDA_COMPILE_CHECK OFF)
# After enable_language (whose checks would ask for a dialect CMake does not know yet).
macro(xalloc_cuda20)
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endmacro()
if(XALLOC_WITH_CUDA)
  enable_language(CUDA)
  xalloc_cuda20()
  find_package(CUDAToolkit REQUIRED)
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    xalloc_cuda20()
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(XALLOC_CUDA_COMPILE_CHECK ON)
    endif()
  endif()
endif()
