# xalloc_target_warnings(<target>): strict warnings for x-allocator's own code.
# Third-party headers (libtorch, LLVM, Eigen) come in as SYSTEM includes and are not affected.
function(xalloc_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wnon-virtual-dtor)
  if(XALLOC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
