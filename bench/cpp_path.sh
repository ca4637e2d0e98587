#!/usr/bin/env bash
# The C++ path on the MinimalGPT sample: what `xprof run` costs against running the program, and
# the time `xrewrite --cpp` takes on one translation unit against clang-tidy on the same unit with
# the same compile command (the goal: at most 1.1x). Runs interleaved, medians of RUNS.
set -euo pipefail
BIN=${BIN:-build/bin}
BUILD=${BUILD:-build}
OUT=${OUT:-data/tmp/bench}
RUNS=${RUNS:-5}
export PATH="$BIN:$PATH"
mkdir -p "$OUT"
TU=samples/minigpt_cpp/main.cpp
ARGS=(--steps 5 --eval-iters 2)
TIDY=$(command -v clang-tidy-14 || command -v clang-tidy || true)

now() { date +%s.%N; }
t0=$(now); minigpt_cpp "${ARGS[@]}" >/dev/null; t1=$(now)
xprof run -q -p "$BUILD" -o "$OUT/minigpt_cpp.profile.json" -- "$BIN/minigpt_cpp" "${ARGS[@]}" >/dev/null; t2=$(now)
xprof run -q -o /dev/null -- "$BIN/minigpt_cpp" "${ARGS[@]}" >/dev/null; t3=$(now)
python3 -c "import sys; a,b,c,d = map(float, sys.argv[1:]); print(f'minigpt_cpp {b-a:.2f} s; under xprof run {d-c:.2f} s ({(d-c)/(b-a):.1f}x), with -p (anchors by Clang) {c-b:.2f} s')" "$t0" "$t1" "$t2" "$t3"
xcost "$OUT/minigpt_cpp.profile.json" | xsched -o "$OUT/minigpt_cpp.schedule.json"

if [[ -z "$TIDY" ]]; then
  echo "clang-tidy not found (apt-get install clang-tidy-14): rewrite timing skipped"
  exit 0
fi
xs=() ts=()
for ((i = 0; i < RUNS; i++)); do
  a=$(now)
  xrewrite -s "$OUT/minigpt_cpp.schedule.json" -p "$BUILD" --cpp "$TU" -q >/dev/null 2>&1
  b=$(now)
  "$TIDY" -p "$BUILD" --quiet --checks='-*,performance-unnecessary-copy-initialization' \
    --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-error "$TU" >/dev/null 2>&1 || true
  c=$(now)
  xs+=("$(python3 -c "print(float('$b') - float('$a'))")")
  ts+=("$(python3 -c "print(float('$c') - float('$b'))")")
done
python3 - "${xs[*]}" "${ts[*]}" <<'PY'
import statistics, sys
x = [float(v) for v in sys.argv[1].split()]
t = [float(v) for v in sys.argv[2].split()]
mx, mt = statistics.median(x), statistics.median(t)
print(f"one translation unit ({len(x)} runs, medians): xrewrite --cpp {mx:.2f} s, clang-tidy {mt:.2f} s, "
      f"ratio {mx / mt:.2f}x (goal <= 1.1x)")
PY
