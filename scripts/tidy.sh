#!/usr/bin/env bash
# clang-tidy (the repository's .clang-tidy: bugprone, performance, function size) over the
# project's code that does not include libtorch (common, formats, memplan, costfit, scheduler,
# the allocator's stages), with the build's compile commands. The suite runs it as lint.tidy.
#   bash scripts/tidy.sh [BUILD_DIR]    exit 0 clean, 1 findings, 77 without clang-tidy
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [[ -z $tidy ]]; then
  echo "tidy: clang-tidy not found: skipped"
  exit 77
fi
if [[ ! -f $build/compile_commands.json ]]; then
  echo "tidy: no $build/compile_commands.json (configure first)" >&2
  exit 2
fi
cd "$root"
files=(common/src/*.cpp formats/src/*.cpp memplan/src/*.cpp costfit/src/*.cpp scheduler/src/*.cpp
  scheduler/src/rules/*.cpp runtime/alloc/{stats,log_stage,retry,simulated_device,stack,ledger}.cpp)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Files whose preprocessed text, .clang-tidy and clang-tidy were all seen clean before are not
# checked again (scripts/tidy_cache.py; XALLOC_TIDY_CACHE=0 checks every file).
stale=("${files[@]}")
cache=0
[[ ${XALLOC_TIDY_CACHE:-1} != 0 ]] && command -v python3 >/dev/null && cache=1
if [[ $cache == 1 ]]; then
  mapfile -t stale < <(python3 scripts/tidy_cache.py stale "$build" "$tidy" "${files[@]}")
fi
rc=0
if [[ ${#stale[@]} -gt 0 ]]; then
  # GCC's warning flags in the compile commands are unknown to clang: not findings.
  printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
    --extra-arg=-Wno-unknown-warning-option >"$log" 2>&1
  rc=$?
fi
if grep -qE '(warning|error): ' "$log"; then
  grep -E -A3 '(warning|error): ' "$log"
  echo "tidy: findings in ${#files[@]} files"
  exit 1
fi
if [[ $rc -ne 0 ]]; then
  tail -20 "$log"
  exit 1
fi
if [[ ${#stale[@]} -gt 0 && $cache == 1 ]]; then
  python3 scripts/tidy_cache.py clean "$build" "$tidy" "${stale[@]}"
fi
echo "tidy: ${#files[@]} files clean (${#stale[@]} checked, $((${#files[@]} - ${#stale[@]})) unchanged since a clean check)"
