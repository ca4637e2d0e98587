#!/usr/bin/env bash
# `make bench-peer`: original / peer / ours on public models, side by side in one process.
# For each model and batch: script it (torchvision, random weights), run the pipeline at one
# thread (xprof --threads 1: libtorch's and OpenBLAS's threads together) on the model frozen
# (xprof --freeze: its layout regions timed in every candidate layout), plan for the fast form
# (xsched --form fast: packed and blocked regions), rewrite it (xrewrite --freeze, checked
# within the default tolerance), then time the original, the peer
# (optimize_for_inference(freeze(m))), ours and ours under the peer, interleaved (xbench-peer).
# Prints one table and the geometric means; JSON per model in OUT. Then the same models in Python,
# as users load them (bench/python_peers.py): the original, the TorchScript peer, ONNX Runtime
# (exported with torch.onnx.export; its Python package), torch.compile with Inductor's freezing
# and ours, interleaved, with p50, p90 and each one's error; a contender beyond the tolerance is
# marked WRONG. Then each contender alone in PROCESSES fresh Python processes (python_peers.py
# --processes; alive together, timed in turns of 0.2 s until each has RUNS calls and 2 s, on one
# core): the p50 of each process, how
# far they spread, p90 and resident memory.
#
# Then, for each thread count in MORE_THREADS (default 2; empty: none), the pipeline again at that
# count (profiled, planned and rewritten at it: a plan is made for the threads it runs at) and
# the four contenders each alone in fresh processes at it (ONNX Runtime with as many intra-op
# threads): the tables' columns at N threads.
#
#   MODELS="resnet18 convnext_tiny" BATCHES="1 8" RUNS=30 THREADS=1 PROCESSES=5 make bench-peer
set -euo pipefail
BIN=${BIN:-build/bin}
SAMPLES=${SAMPLES:-build/samples}
OUT=${OUT:-data/tmp/bench-peer}
RUNS=${RUNS:-30}
THREADS=${THREADS:-1}
PROCESSES=${PROCESSES:-5}
BATCHES=${BATCHES:-1}
MORE_THREADS=${MORE_THREADS-2}
MODELS=${MODELS:-"resnet18 mobilenet_v3_small convnext_tiny efficientnet_b0 swin_t shufflenet_v2_x1_0 regnet_y_400mf"}
SAMPLE_MODELS=${SAMPLE_MODELS:-"minigpt smallcnn"}
PY=${PY:-$(make -s -C "$(dirname "$0")/.." print-python)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export PATH="$BIN:$PATH"

echo "backend: $("$PY" -c 'import re, torch; m = re.search(r"(?:oneDNN|MKL-DNN) (v[0-9.]+)", torch.__config__.show()); print("torch", torch.__version__, "oneDNN", m.group(1) if m else "?")'), threads $THREADS"
ORT=1 # ONNX Runtime's Python package, in the project's environment
results=()
python_results=()
run_one() { # run_one NAME MODEL.pt
  local name=$1 model=$2 d="$OUT/$1"
  mkdir -p "$d"
  xprof "$model" --threads "$THREADS" --freeze -q -o "$d/profile.json"
  xcost "$d/profile.json" | xsched --form fast -o "$d/schedule.json"
  xrewrite "$model" -s "$d/schedule.json" --freeze -o "$d/ours.pt" -q
  xbench-peer "$model" "$d/ours.pt" --peer-of-ours --threads "$THREADS" --runs "$RUNS" \
    --json "$d/table.json"
  results+=("$d/table.json")
  # In Python, four contenders (the ONNX file beside the model, when it exported).
  local onnx=()
  [[ $ORT -eq 1 && -f ${model%.pt}.onnx ]] && onnx=(--onnx "${model%.pt}.onnx")
  [[ -f ${model%.pt}.eager.pt ]] && onnx+=(--eager "${model%.pt}.eager.pt")
  "$PY" "$HERE/python_peers.py" --original "$model" --ours "$d/ours.pt" "${onnx[@]}" \
    --rounds "$RUNS" --threads "$THREADS" --json "$d/python.json"
  python_results+=("$d/python.json")
  if [[ $PROCESSES -gt 0 ]]; then
    "$PY" "$HERE/python_peers.py" --original "$model" --ours "$d/ours.pt" "${onnx[@]}" \
      --rounds "$RUNS" --threads "$THREADS" --processes "$PROCESSES" --json "$d/processes.json"
    local t
    for t in $MORE_THREADS; do
      [[ $t == "$THREADS" ]] && continue
      local dt="$d/threads$t"
      mkdir -p "$dt"
      xprof "$model" --threads "$t" --freeze -q -o "$dt/profile.json"
      xcost "$dt/profile.json" | xsched --form fast -o "$dt/schedule.json"
      xrewrite "$model" -s "$dt/schedule.json" --freeze -o "$dt/ours.pt" -q
      "$PY" "$HERE/python_peers.py" --original "$model" --ours "$dt/ours.pt" "${onnx[@]}" \
        --rounds "$RUNS" --threads "$t" --processes "$PROCESSES" --json "$dt/processes.json"
    done
  fi
}
for b in $BATCHES; do
  # shellcheck disable=SC2086
  for path in $("$PY" "$HERE/torchvision_models.py" --onnx "$OUT/models" "$b" $MODELS); do
    name=$(basename "$path" .pt)
    echo "== $name"
    run_one "$name" "$path"
  done
done
for name in $SAMPLE_MODELS; do
  if [[ -f "$SAMPLES/$name.pt" ]]; then
    echo "== $name"
    run_one "$name" "$SAMPLES/$name.pt"
  fi
done

"$PY" - "${results[@]}" <<'PY'
import json, math, sys
rows = [json.load(open(p)) for p in sys.argv[1:]]
print()
print(f"{'model':<28} {'original ms':>11} {'peer':>7} {'ours':>7} {'ours+peer':>9} {'ours/peer':>9} {'best/peer':>9}  max error")
g = {"peer": [], "ours": [], "ours+peer": [], "ours/peer": [], "best/peer": []}
for r in rows:
    c = {x["name"].split("/")[-1]: x for x in r["contenders"]}
    orig, peer = c["original"], c["peer"]
    ours = next(x for k, x in c.items() if k.endswith("ours.pt"))
    both = next((x for k, x in c.items() if k.endswith("+peer")), None)
    best = max([ours] + ([both] if both else []), key=lambda x: x["vs_original"])
    name = r["model"].split("/")[-1].removesuffix(".pt")
    err = max(float(x["max_error"]) for x in r["contenders"])
    print(f"{name:<28} {orig['median_ms']:>11.2f} {peer['vs_original']:>6.2f}x {ours['vs_original']:>6.2f}x "
          f"{(both or ours)['vs_original']:>8.2f}x {ours['vs_peer']:>8.2f}x {best['vs_peer']:>8.2f}x  {err:.1e}")
    g["peer"].append(peer["vs_original"]); g["ours"].append(ours["vs_original"])
    g["ours+peer"].append((both or ours)["vs_original"]); g["ours/peer"].append(ours["vs_peer"])
    g["best/peer"].append(best["vs_peer"])
gm = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in g.items() if v}
print(f"{'geometric mean':<28} {'':>11} {gm['peer']:>6.2f}x {gm['ours']:>6.2f}x {gm['ours+peer']:>8.2f}x "
      f"{gm['ours/peer']:>8.2f}x {gm['best/peer']:>8.2f}x")
PY

# The tables in Python of this run's models, as the README has them (bench/peer_table.py): four
# contenders interleaved and each alone, p50 and p90, errors, geometric means.
if [[ ${#python_results[@]} -gt 0 ]]; then
  echo
  "$PY" "$HERE/peer_table.py" "${python_results[@]%/python.json}"
fi
