# formats' sources, relative to formats/: the one list, read by formats/CMakeLists.txt and by the
# fuzzing build (fuzz/CMakeLists.txt), which compiles the readers again with the sanitizers.
set(XALLOC_FORMATS_SOURCES
  src/anchor_match.cpp
  src/types.cpp
  src/cost.cpp
  src/documents.cpp
  src/json_reader.cpp
  src/layout_traits.cpp
  src/op_facts.cpp
  src/profile.cpp
  src/region.cpp
  src/schedule.cpp)
