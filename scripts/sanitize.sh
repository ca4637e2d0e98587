#!/usr/bin/env bash
# The torch-free unit tests (xalloc_unit_tests: documents, cost fits, rules, solver, planner)
# built with ASan+UBSan (Debug) in their own build folder, and run. `make check` (and so CI)
# runs it as the CTest test sanitize.unit.
#   bash scripts/sanitize.sh [BUILD_DIR]     (default build-asan)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
jobs=$(nproc)
# ccache hits across clones (CI builds a fresh one each time): paths under the clone hashed
# relative to it, and the build folder not hashed. Only this build: the tests that read the main
# build's debug information want its absolute paths.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DXALLOC_BUILD_BENCH=OFF \
  ${XALLOC_VENV:+-DXALLOC_PYTHON=$XALLOC_VENV/bin/python} >/dev/null
cmake --build "$build" -j "$jobs" --target xalloc_unit_tests >"$build/sanitize-build.log" 2>&1 || {
  grep -E "error|Error" "$build/sanitize-build.log" | head -30
  exit 1
}
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$build/bin/xalloc_unit_tests" --gtest_brief=1
