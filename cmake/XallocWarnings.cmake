# xalloc_target_warnings(<target>): strict warnings for x-allocator's own code.
# Third-party headers (libtorch, LLVM, Eigen) come in as SYSTEM includes and are not affected.
# CUDA sources (nvcc) get the host compiler's -Wall -Wextra and nvcc's own warnings as errors.
function(xalloc_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(XALLOC_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()
