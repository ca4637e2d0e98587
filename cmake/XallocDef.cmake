# Registries that are the only list: a .def file names each entry once, and the sources are the
# files it names. xalloc_sources_from_def(<out> <def> <macro> <dir>) reads each line
# `<MACRO>(name, ...)` or `<MACRO>("name", ...)` of <def> (<macro> is a regular expression), and sets <out> to <dir>/<name>.cpp
# (dashes as underscores), each once, in the order first named. CMake re-runs when <def> changes.
function(xalloc_sources_from_def out def macro dir)
  file(STRINGS ${def} lines REGEX "^${macro}\\(")
  set(files)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^${macro}\\(\"?([A-Za-z0-9_-]+)\"?.*" "\\1" name "${line}")
    string(REPLACE "-" "_" name "${name}")
    list(APPEND files ${dir}/${name}.cpp)
  endforeach()
  list(REMOVE_DUPLICATES files)
  if(NOT files)
    message(FATAL_ERROR "${def} names no ${macro}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${def})
  set(${out} ${files} PARENT_SCOPE)
endfunction()
