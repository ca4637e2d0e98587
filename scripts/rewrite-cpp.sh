#!/usr/bin/env bash
# `make rewrite-cpp`: the C++ path on the MinimalGPT sample (samples/minigpt_cpp). `xprof run`
# profiles the unmodified program, xcost and xsched decide, `xrewrite --cpp` prints the patch.
# Then the patch is applied to a copy of the sample, the original and the patched sources are
# built with one compile command, their training losses compared, and their forward passes
# timed side by side: interleaved rounds, each program in turn, at THREADS threads (OpenBLAS's
# and torch's together).
#
# Settings from the environment (the Makefile passes them): BIN, BUILD, OUT, THREADS, RUNS
# (rounds), ITERS (forward passes per program per round).
set -euo pipefail
BIN=${BIN:-build/bin}
BUILD=${BUILD:-build}
OUT=${OUT:-data/tmp}
THREADS=${THREADS:-1}
RUNS=${RUNS:-15}
ITERS=${ITERS:-40}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
mkdir -p "$OUT"
run() {
  echo "+ $*" >&2
  "$@"
}
p="$OUT/minigpt_cpp"
run "$BIN/xprof" run -p "$BUILD" -o "$p.profile.json" -- "$BIN/minigpt_cpp" --steps 5
run "$BIN/xcost" "$p.profile.json" -o "$p.cost.json"
run "$BIN/xsched" --profile "$p.profile.json" --cost "$p.cost.json" -o "$p.schedule.json" --explain
run "$BIN/xrewrite" -s "$p.schedule.json" -p "$BUILD" --cpp samples/minigpt_cpp/main.cpp >"$p.diff"
cat "$p.diff"
if [[ ! -s "$p.diff" ]]; then
  echo "rewrite-cpp: no edit was measured worth making: nothing to time"
  exit 0
fi

# The original and the patched sources, built alike (the sample's own build has debug info).
rm -rf "$p.patched"
mkdir -p "$p.patched/samples"
cp -r samples/minigpt_cpp "$p.patched/samples/"
run patch -s -d "$p.patched" -p1 <"$p.diff"
CXX=(g++)
command -v ccache >/dev/null && CXX=(ccache g++)
# Built as users build against the wheel's libtorch (C++20, its CXX11 ABI, torch_cpu and c10).
torch_dir=$("${PYTHON:?set by make}" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
FLAGS=(-O2 -std=c++20 -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include"
       -D_GLIBCXX_USE_CXX11_ABI=1)
LIBS=(-L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -ltorch_cpu -lc10)
echo "+ building the original and the patched sample" >&2
"${CXX[@]}" "${FLAGS[@]}" samples/minigpt_cpp/main.cpp -o "$p.original" "${LIBS[@]}" &
"${CXX[@]}" "${FLAGS[@]}" "$p.patched/samples/minigpt_cpp/main.cpp" -o "$p.rewritten" "${LIBS[@]}"
wait $!

# The same training: losses of 12 steps, which the rewrite may move within xsched's tolerance.
"$p.original" --steps 12 --eval-iters 0 >"$p.loss-original.txt"
"$p.rewritten" --steps 12 --eval-iters 0 >"$p.loss-rewritten.txt"
# Forward passes, interleaved: each round runs both programs, in alternating order.
: >"$p.times.txt"
for ((i = 0; i < RUNS; i++)); do
  order=(original rewritten)
  ((i % 2)) && order=(rewritten original)
  for which in "${order[@]}"; do
    ms=$("$p.$which" --steps 0 --eval-iters "$ITERS" | sed -n 's/^inference: \([0-9.e+-]*\) ms.*/\1/p')
    echo "$i $which $ms" >>"$p.times.txt"
  done
done
"$PYTHON" - "$p.loss-original.txt" "$p.loss-rewritten.txt" "$p.times.txt" "$THREADS" <<'PY'
import re, statistics, sys
a, b = ([float(x) for x in re.findall(r"loss ([-0-9.e]+)", open(f).read())] for f in sys.argv[1:3])
assert len(a) == len(b) > 0, "no losses printed"
worst = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b))
rounds = {}
for line in open(sys.argv[3]):
    i, which, ms = line.split()
    rounds.setdefault(i, {})[which] = float(ms)
pairs = [(r["original"], r["rewritten"]) for r in rounds.values() if len(r) == 2]
orig = statistics.median(o for o, _ in pairs)
ours = statistics.median(n for _, n in pairs)
speedup = statistics.median(o / n for o, n in pairs)
print(f"minigpt_cpp forward, {len(pairs)} interleaved rounds at {sys.argv[4]} thread(s): "
      f"original {orig:.3f} ms, rewritten {ours:.3f} ms, {speedup:.3f}x "
      f"(median of per-round ratios)")
print("losses over 12 training steps: " +
      ("identical" if worst == 0 else f"max relative difference {worst:.2e}"))
PY
