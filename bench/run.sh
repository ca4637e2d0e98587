#!/usr/bin/env bash
# `make bench`: rewrites the bundled sample and the test models with the full measurement
# settings, then times original against rewritten side by side (interleaved, warm-up, median of
# RUNS >= 30) and prints the ratios.
set -euo pipefail
BIN=${BIN:-build/bin}
SAMPLES=${SAMPLES:-build/samples}
OUT=${OUT:-data/tmp/bench}
RUNS=${RUNS:-50}
mkdir -p "$OUT"
export PATH="$BIN:$PATH"
for name in minigpt mixer redundant frozen; do
  model="$SAMPLES/$name.pt"
  echo "== $name"
  xprof "$model" -q -o "$OUT/$name.profile.json"
  xcost "$OUT/$name.profile.json" | xsched -o "$OUT/$name.schedule.json"
  xrewrite "$model" -s "$OUT/$name.schedule.json" -o "$OUT/$name.opt.pt" -q
  python3 - "$OUT/$name.schedule.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
c = s["counts"]
print(f"decisions: {c['sync']} sync, {c['remove']} remove, {c['none']} none; "
      f"predicted {s['predicted_time_before_ms']:.3f} -> {s['predicted_time_after_ms']:.3f} ms")
PY
  xbench-latency "$model" "$OUT/$name.opt.pt" --runs "$RUNS"
done

echo "== profiling cost (in process)"
xbench-profile "$SAMPLES/minigpt.pt" "$SAMPLES/shufflecnn.pt" "$SAMPLES/attention.pt"
echo "== profiling cost (whole xprof commands, start-up included)"
db="$OUT/bench-timings.sqlite"
rm -f "$db"
for name in minigpt attention; do
  t0=$(date +%s.%N); xprof "$SAMPLES/$name.pt" -q --db "$db" -o /dev/null; t1=$(date +%s.%N)
  xprof "$SAMPLES/$name.pt" -q --db "$db" -o /dev/null; t2=$(date +%s.%N)
  python3 -c "import sys; a, b, c = map(float, sys.argv[1:4]); print(f'{sys.argv[4]:<12} first {b-a:6.2f} s, second {c-b:6.2f} s, speedup {(b-a)/(c-b):4.1f}x')" "$t0" "$t1" "$t2" "$name"
done
rm -f "$db"

echo "== reproducibility: two profiles without the timing database, same decisions?"
for name in minigpt mixer shufflecnn; do
  for i in 1 2; do
    xprof "$SAMPLES/$name.pt" -q --no-db | xcost | xsched -o "$OUT/$name.repro$i.json"
  done
  python3 - "$OUT/$name.repro1.json" "$OUT/$name.repro2.json" "$name" <<'PY'
import json, sys
def decisions(path):
    return {(d["anchor"]["expr"], d["anchor"]["ordinal"], d["anchor"]["op"]): d["action"]
            for d in json.load(open(path))["decisions"]}
a, b = decisions(sys.argv[1]), decisions(sys.argv[2])
diff = [k for k in a if a[k] != b.get(k)]
acted = sum(1 for v in a.values() if v != "none")
print(f"{sys.argv[3]:<12} {len(a)} sites, {acted} acted on; "
      + ("same decisions" if not diff else f"{len(diff)} differ: {diff}"))
PY
done

echo "== cost models on an independent sweep (fit on seed 0, test on seed 1)"
for seed in 0 1; do
  xprof "$SAMPLES/mixer.pt" -q --no-db --no-consumers --sweep --seed $seed -o "$OUT/sweep$seed.json"
done
xcost "$OUT/sweep0.json" --test "$OUT/sweep1.json" -o "$OUT/sweep.cost.json" --report | tail -8
echo "-- the same, also fitted on a ${CALIBRATION:=960}-layout calibration sweep (seed 2, xcost --train)"
xprof "$SAMPLES/mixer.pt" -q --no-db --no-consumers --sweep --sweep-count "$CALIBRATION" --seed 2 \
  -o "$OUT/sweep2.json"
xcost "$OUT/sweep0.json" --train "$OUT/sweep2.json" --test "$OUT/sweep1.json" -o /dev/null --report |
  grep -E '^(stride|classic), --test|--test MAPE'
xbench-costfit

echo "== memory planning"
xbench-memplan "$OUT/minigpt.profile.json" "$OUT/mixer.profile.json"

echo "== scheduler: exact solver on seeded instances"
xbench-sched

echo "== end to end: xsched's plan (portable, fast) against contiguous-everywhere and strip-all"
OUT="$OUT" RUNS="$RUNS" BIN="$BIN" SAMPLES="$SAMPLES" bash "$(dirname "$0")/policies.sh"

echo "== the C++ path: xprof run on minigpt_cpp, xrewrite --cpp against clang-tidy"
OUT="$OUT" BIN="$BIN" BUILD="$(dirname "$BIN")" bash "$(dirname "$0")/cpp_path.sh"

echo "== the async runtime's conversion kernel against ATen and a plain copy"
xbench-kernel

echo "== graceful allocator: overhead over the raw upstream"
xbench-alloc

echo "== micro-benchmarks"
xbench-micro --benchmark_min_time=0.2
