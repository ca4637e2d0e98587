#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer harness of fuzz/ (built in BUILD, clang-14 with ASan and
# UBSan) for SECONDS, seeded with fuzz/corpus/<harness>/, its growing corpus and any crash kept
# in data/tmp/fuzz/. Prints each harness's executions and coverage; exits 1 on a finding.
#
#   scripts/fuzz.sh BUILD SECONDS [HARNESS...]
#   scripts/fuzz.sh --brief BUILD SECONDS    the test suite's run (fuzz.brief): configures and
#                                            builds BUILD at -O0 first, keeps its corpus there,
#                                            and skips (77) where clang-14 is not installed
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/tmp/fuzz
if [[ ${1:-} == --brief ]]; then
  shift
  command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 is not installed: skipped"; exit 77; }
  [[ -f $1/CMakeCache.txt ]] ||
    CXX=clang++-14 CC=clang-14 cmake -S fuzz -B "$1" -DCMAKE_BUILD_TYPE= -DXALLOC_FUZZ_OPT=-O0 >/dev/null
  cmake --build "$1" -j 1 >/dev/null
  out=$1/runs
fi
build=$1
seconds=$2
shift 2
harnesses=("$@")
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=(documents stream bytes anchors)
mkdir -p "$out/artifacts"
found=0
for h in "${harnesses[@]}"; do
  mkdir -p "$out/$h"
  log="$out/$h.log"
  rc=0
  "$build/fuzz_$h" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
    -artifact_prefix="$out/artifacts/$h-" "$out/$h" "fuzz/corpus/$h" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [[ $rc -ne 0 ]]; then
    found=1
    echo "fuzz_$h: FINDING after ${execs:-?} executions ($cov): $log, $(ls "$out/artifacts" | grep "^$h-" | head -1)"
  else
    echo "fuzz_$h: ${seconds} s, ${execs:-?} executions, $cov, no finding"
  fi
done
exit $found
