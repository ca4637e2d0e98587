#!/usr/bin/env bash
# The timing database and xprof's launcher (a repeated profile answered without libtorch, the
# same bytes as xprof-core's), another BLAS counted as another machine, stderr off a terminal,
# xcost predict, an older cost.json, and xcost --train on a calibration sweep.
source "$(dirname "$0")/lib.sh"

# The mixer's profile and cost model, as the pipeline makes them.
mkdir -p "$WORK/mixer"
xprof "$XALLOC_SAMPLES/mixer.pt" -o "$WORK/mixer/profile.json" "${QUICK[@]}"
xcost "$WORK/mixer/profile.json" -o "$WORK/mixer/cost.json"

# The timing database: a second profile of the same model measures nothing again.
DBQ=(--iterations 3 --warmup 1 --repeats 7 --db "$WORK/timings.sqlite")
xprof "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/db1.json" 2>"$WORK/db1.err"
xprof "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/db2.json" --trace "$WORK/trace.json" -q
python3 - "$WORK/db1.json" "$WORK/db2.json" "$WORK/trace.json" <<'PY' || fail "timing database or trace"
import json, sys
a, b = (json.load(open(f))["settings"] for f in sys.argv[1:3])
assert a["db_misses"] > 0 and b["db_misses"] == 0 and b["db_hits"] > 0, (a, b)
trace = json.load(open(sys.argv[3]))
assert any(e.get("ph") == "X" for e in trace["traceEvents"])
PY
# Without --trace, the unchanged model's finished profile is reused whole, and is still valid.
xprof "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/db3.json" -q
validate "$WORK/db3.json" || fail "a reused profile does not validate"
python3 - "$WORK/db1.json" "$WORK/db3.json" <<'PY' || fail "the finished profile was not reused"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert b["settings"]["reused_profile"] and not a["settings"]["reused_profile"]
assert a["records"] == b["records"] and a["gpu_idle_events"] == b["gpu_idle_events"]
PY
# That third run was answered by xprof's launcher, which loads no libtorch: the same document
# xprof-core gives when it reuses the profile itself. A model changed in place is profiled anew.
! ldd "$(command -v xprof)" | grep -q libtorch || fail "the xprof launcher loads libtorch"
xprof-core "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/db3core.json" -q
cmp -s "$WORK/db3.json" "$WORK/db3core.json" || fail "the launcher's answer differs from xprof-core's"
cp "$XALLOC_SAMPLES/mixer.pt" "$WORK/changing.pt"
xprof "$WORK/changing.pt" "${DBQ[@]}" -o "$WORK/ch1.json" -q
xprof "$WORK/changing.pt" "${DBQ[@]}" -o "$WORK/ch2.json" -q
cp "$XALLOC_SAMPLES/redundant.pt" "$WORK/changing.pt"
xprof "$WORK/changing.pt" "${DBQ[@]}" -o "$WORK/ch3.json" -q
python3 - "$WORK/ch1.json" "$WORK/ch2.json" "$WORK/ch3.json" <<'PY' || fail "launcher reuse"
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:4])
assert b["settings"]["reused_profile"] and a["records"] == b["records"]
assert c["model"]["sha256"] != a["model"]["sha256"] and c["records"] != a["records"]
PY
# A rebuilt runtime library (the fast form's packed and blocked kernels, in every region's
# timing) measures afresh: neither the launcher nor xprof-core answers from the old one's.
mkdir -p "$WORK/tree/bin" "$WORK/tree/lib"
cp "$(command -v xprof)" "$(command -v xprof-core)" "$WORK/tree/bin/"
cp "$XALLOC_BIN/../lib/libxalloc_runtime.so" "$WORK/tree/lib/"
RT=(env "LD_LIBRARY_PATH=$WORK/tree/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
"${RT[@]}" "$WORK/tree/bin/xprof" "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/rt1.json" -q
"${RT[@]}" "$WORK/tree/bin/xprof" "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/rt2.json" -q
touch -d "+1 second" "$WORK/tree/lib/libxalloc_runtime.so"
"${RT[@]}" "$WORK/tree/bin/xprof" "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/rt3.json" -q
python3 - "$WORK/rt2.json" "$WORK/rt3.json" <<'PY' || fail "a rebuilt runtime's profile came from the old one's"
import json, sys
a, b = (json.load(open(f))["settings"] for f in sys.argv[1:3])
assert a["reused_profile"], a
assert not b["reused_profile"] and b["db_misses"] > 0, b
PY
# Another BLAS is another machine for the consumers' timings and output bits: neither the
# launcher nor xprof-core answers from measurements taken on the first (a copy of the same
# library, found first through LD_LIBRARY_PATH, stands in for OpenBLAS).
blas=$(ldd "$(command -v xprof-core)" | awk '$1 == "libblas.so.3" { print $3 }')
if [[ -n "$blas" ]]; then
  mkdir -p "$WORK/otherblas"
  cp -L "$blas" "$WORK/otherblas/libblas.so.3"
  LD_LIBRARY_PATH="$WORK/otherblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    xprof "$XALLOC_SAMPLES/mixer.pt" "${DBQ[@]}" -o "$WORK/db4.json" -q
  python3 - "$WORK/db4.json" <<'PY' || fail "measurements taken on another BLAS were reused"
import json, sys
s = json.load(open(sys.argv[1]))["settings"]
assert not s["reused_profile"] and s["db_misses"] > 0, s
PY
  # The profile and its schedule name the BLAS; rewriting elsewhere warns that the savings were
  # measured there, and rewriting where it was profiled does not.
  grep -q "otherblas/libblas.so.3@" "$WORK/db4.json" || fail "the profile does not name its BLAS"
  xcost "$WORK/db4.json" | xsched --profile "$WORK/db4.json" -o "$WORK/db4-schedule.json"
  validate "$WORK/db4.json" "$WORK/db4-schedule.json" || fail "documents naming a BLAS do not validate"
  xrewrite "$XALLOC_SAMPLES/mixer.pt" -s "$WORK/db4-schedule.json" --diff -q >/dev/null 2>"$WORK/blas.err"
  grep -qF "db4-schedule.json: warning: the schedule was profiled on other math libraries ($WORK/otherblas/libblas.so.3, here $(readlink -f "$blas"))" \
    "$WORK/blas.err" || fail "no warning about another BLAS: $(cat "$WORK/blas.err")"
  LD_LIBRARY_PATH="$WORK/otherblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    xrewrite "$XALLOC_SAMPLES/mixer.pt" -s "$WORK/db4-schedule.json" --diff -q >/dev/null 2>"$WORK/blas2.err"
  [[ ! -s "$WORK/blas2.err" ]] || fail "a warning on the BLAS profiled with: $(cat "$WORK/blas2.err")"
fi

# Off a terminal there is no progress bar: one summary line on stderr, and a note when libtorch
# runs on Debian's reference BLAS.
[[ $(grep -vc ': note: ' "$WORK/db1.err") -eq 1 ]] && grep -q '^xprof: .* ops, .* idle windows' "$WORK/db1.err" ||
  fail "unexpected stderr: $(cat "$WORK/db1.err")"
if [[ -n "$blas" && $(readlink -f "$blas") == */blas/libblas.so* ]]; then
  grep -q "mixer.pt: note: libtorch runs on the reference BLAS ($(readlink -f "$blas"))" "$WORK/db1.err" ||
    fail "no note on the reference BLAS: $(cat "$WORK/db1.err")"
else
  ! grep -q 'reference BLAS' "$WORK/db1.err" || fail "a reference-BLAS note for $blas"
fi
! grep -q $'\r' "$WORK/db1.err" || fail "progress bar drawn off a terminal"

# xcost predict answers layouts line by line.
printf '%s\n' '{"sizes":[64,64],"strides":[1,64],"dtype":"float32","device":"cpu"}' \
  '{"sizes":[8,8],"strides":[8,1],"dtype":"float32"}' |
  xcost predict --cost "$WORK/mixer/cost.json" >"$WORK/pred.jsonl"
[[ $(wc -l <"$WORK/pred.jsonl") -eq 2 ]] || fail "predict should answer each line"
grep -q '"model"' "$WORK/pred.jsonl" || fail "predict output lacks the model"
for m in stride classic; do
  echo '{"sizes":[96,64],"strides":[1,96],"dtype":"float32"}' |
    xcost predict --cost "$WORK/mixer/cost.json" --model $m | grep -q "\"model\":\"$m\"" ||
    fail "predict --model $m did not answer with that model"
done
# A cost.json from an older xcost (other feature names): its stride model is not used with the
# wrong columns; both tools say so and predict with the classic model.
sed 's/"ramp_L3"/"w_L3"/' "$WORK/mixer/cost.json" >"$WORK/old-cost.json"
echo '{"sizes":[96,64],"strides":[1,96],"dtype":"float32"}' |
  xcost predict --cost "$WORK/old-cost.json" 2>"$WORK/old.err" | grep -q '"model":"classic"' ||
  fail "a stale stride model was used"
xsched --profile "$WORK/mixer/profile.json" --cost "$WORK/old-cost.json" -o /dev/null 2>>"$WORK/old.err"
[[ $(grep -c "old-cost.json: warning: the stride model was fitted on other features" "$WORK/old.err") -eq 2 ]] ||
  fail "no warning about a stale stride model: $(cat "$WORK/old.err")"

# A calibration sweep of the same machine widens the fit (xcost --train): more samples shape the
# models, the cost table keeps the profile's own layouts, and a layout both have counts once.
xprof "$XALLOC_SAMPLES/mixer.pt" "${QUICK[@]}" --no-consumers --sweep --sweep-count 24 \
  --sweep-max-bytes 1M --seed 3 -o "$WORK/sweep3.json"
xcost "$WORK/mixer/profile.json" --train "$WORK/sweep3.json" --train "$WORK/sweep3.json" \
  -o "$WORK/trained.json" || fail "xcost --train"
python3 - "$WORK/mixer/profile.json" "$WORK/sweep3.json" "$WORK/mixer/cost.json" "$WORK/trained.json" <<'PY' ||
import json, sys
prof, sweep, plain, trained = (json.load(open(p)) for p in sys.argv[1:])
# The stride model fits conversions to row-major; a channels-last conversion has its own fit.
timed = lambda t: {c["key"] for c in t["conversion_cost_table"]
                   if c["median_ms"] > 0 and c.get("target", "contiguous") == "contiguous"}
n = lambda cost: next(p["n_samples"] for p in cost["stride_model"][0]["paths"] if p["path"] == "any")
assert len(timed(sweep) - timed(prof)) >= 20, "the sweep adds layouts"
assert n(plain) == len(timed(prof)), (n(plain), len(timed(prof)))
assert n(trained) == len(timed(prof) | timed(sweep)), (n(trained), len(timed(prof) | timed(sweep)))
assert trained["conversion_cost_table"] == plain["conversion_cost_table"], "the table changed"
assert trained["stride_model"][0]["holdout"]["samples"] == n(trained)
PY
  fail "xcost --train did not fit on the union of layouts"

echo "cli.database: ok"
