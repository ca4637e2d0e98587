#!/usr/bin/env bash
# `make bench-families`: detectors, segmenters and video models as their users call them
# (bench/family_models.py: weights whose outputs depend on the input; a detector given a list of
# one 3x320x320 image, segmentation 1x3x320x320, video 1x3x8x112x112). For each: the default
# pipeline as `make profile rewrite` runs it (xprof --freeze, timed: its first run, with an empty
# timing database of its own), then each contender alone in PROCESSES fresh Python processes
# (bench/python_peers.py --processes: the original, the TorchScript peer, torch.compile with
# Inductor's freezing (its compile time reported apart), ONNX Runtime where the
# model exports, ours), one thread. Prints one table: medians, ours over each, errors.
#
#   MODELS="r3d_18 fcn_resnet50" PROCESSES=3 RUNS=20 make bench-families
set -euo pipefail
BIN=${BIN:-build/bin}
OUT=${OUT:-data/tmp/bench-families}
RUNS=${RUNS:-20}
THREADS=${THREADS:-1}
PROCESSES=${PROCESSES:-3}
MODELS=${MODELS:-"ssdlite320_mobilenet_v3_large fasterrcnn_mobilenet_v3_large_320_fpn retinanet_resnet50_fpn fcn_resnet50 deeplabv3_mobilenet_v3_large lraspp_mobilenet_v3_large r3d_18 r2plus1d_18 mc3_18 vgg11_bn"}
PY=${PY:-$(make -s -C "$(dirname "$0")/.." print-python)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export PATH="$BIN:$PATH"
ORT=1 # ONNX Runtime's Python package, in the project's environment
echo "backend: $("$PY" -c 'import re, torch; m = re.search(r"(?:oneDNN|MKL-DNN) (v[0-9.]+)", torch.__config__.show()); print("torch", torch.__version__, "oneDNN", m.group(1) if m else "?")'), threads $THREADS"
results=()
# shellcheck disable=SC2086
for model in $("$PY" "$HERE/family_models.py" --onnx "$OUT/models" $MODELS); do
  name=$(basename "$model" .pt)
  d="$OUT/$name"
  mkdir -p "$d"
  echo "== $name"
  list=()
  [[ $name == ssd* || $name == retinanet* || $name == fasterrcnn* || $name == maskrcnn* ||
     $name == fcos* || $name == keypointrcnn* ]] && list=(--list)
  start=$(date +%s.%N)
  xprof "$model" --threads "$THREADS" --freeze --db "$d/timings.sqlite" -q -o "$d/profile.json"
  "$PY" -c 'import sys, time; print(f"xprof: {time.time() - float(sys.argv[1]):.1f} s (first run)")' "$start" |
    tee "$d/xprof-seconds.txt"
  xcost "$d/profile.json" | xsched --form fast -o "$d/schedule.json"
  rm -f "$d/ours.pt" "$d/processes.json"
  xrewrite "$model" -s "$d/schedule.json" --freeze -o "$d/ours.pt" 2>"$d/xrewrite.log" || true
  grep -E '^xrewrite: (outputs|[0-9]+ applied)|error:' "$d/xrewrite.log" || true
  if [[ ! -f $d/ours.pt ]]; then
    echo "bench-families: $name: xrewrite wrote nothing (above): not timed" >&2
    continue
  fi
  onnx=()
  [[ $ORT -eq 1 && -f ${model%.pt}.onnx ]] && onnx=(--onnx "${model%.pt}.onnx")
  [[ -f ${model%.pt}.eager.pt ]] && onnx+=(--eager "${model%.pt}.eager.pt")
  "$PY" "$HERE/python_peers.py" --original "$model" --ours "$d/ours.pt" "${onnx[@]}" "${list[@]}" \
    --rounds "$RUNS" --threads "$THREADS" --processes "$PROCESSES" --json "$d/processes.json"
done
# Every model measured into OUT, this run's and earlier ones' (MODELS= re-measures some).
for d in "$OUT"/*/; do
  [[ -f $d/processes.json ]] && results+=("${d%/}")
done

"$PY" - "${results[@]}" <<'PY'
import json, math, os, sys
print()
print(f"{'model':<40} {'xprof s':>7} {'original':>9} {'peer':>8} {'compile':>8} {'ORT':>8} "
      f"{'ours':>8} {'/orig':>6} {'/peer':>6} {'/comp':>6} {'/ORT':>6}  errors (peer, compile, "
      "ORT, ours); compile s")
keys = (("orig", "original", "the original"), ("peer", "peer", "the TorchScript peer"),
        ("comp", "compile", "torch.compile"), ("ort", "onnxruntime", "ONNX Runtime"))
geo = {k: [] for k, _, _ in keys}
for d in sys.argv[1:]:
    p = json.load(open(os.path.join(d, "processes.json")))
    c = {r["name"]: r for r in p["contenders"]}
    secs = open(os.path.join(d, "xprof-seconds.txt")).read().split()[1]
    ms = {n: c[n]["median_ms"] if n in c else None for _, n, _ in keys + (("", "ours", ""),)}
    r = {k: ms[n] / ms["ours"] if ms[n] else None for k, n, _ in keys}
    for k, v in r.items():
        if v:
            geo[k].append(math.log(v))
    fmt = lambda v, w=8, f=".2f": f"{v:>{w}{f}}" if v else f"{'-':>{w}}"
    errs = ", ".join(f"{c[n]['max_error']:.0e}" if n in c else "-"
                     for n in ("peer", "compile", "onnxruntime", "ours"))
    compile_s = c.get("compile", {}).get("compile_s")
    comp = f"{'failed':>8}" if p.get("failed", {}).get("compile") else fmt(ms["compile"])
    print(f"{os.path.basename(d):<40} {secs:>7} {fmt(ms['original'], 9)} {fmt(ms['peer'])} "
          f"{comp} {fmt(ms['onnxruntime'])} {fmt(ms['ours'])} "
          + " ".join(f"{fmt(r[k], 5)}x" for k, _, _ in keys)
          + f"  {errs}; {f'{compile_s:.0f}' if compile_s else '-'}")
for k, _, name in keys:
    if geo[k]:
        print(f"ours over {name}: {math.exp(sum(geo[k]) / len(geo[k])):.2f}x geometric mean "
              f"over {len(geo[k])} models")
for d in sys.argv[1:]:
    for n, why in json.load(open(os.path.join(d, "processes.json"))).get("failed", {}).items():
        print(f"{os.path.basename(d)}: {n} failed: {why}")
PY
