# common's sources, relative to common/: read by common/CMakeLists.txt and by the fuzzing build
# (fuzz/CMakeLists.txt). The core has no third-party dependency (the runtime links it alone);
# io is what the document readers need beside it.
set(XALLOC_COMMON_CORE_SOURCES src/best_fit.cpp src/bytes.cpp src/error.cpp)
set(XALLOC_COMMON_IO_SOURCES src/io.cpp)
set(XALLOC_COMMON_OTHER_SOURCES
  src/math_libraries.cpp
  src/op_library.cpp
  src/threads.cpp
  src/tool.cpp
  src/trace_event.cpp)
