#!/usr/bin/env bash
# `make profile` / `make rewrite` for one or more TorchScript models: profile (frozen), fit the
# cost model, plan, then (rewrite) write the rewritten model with its graph diff and time it
# against the original and the peer (torch.jit.optimize_for_inference(torch.jit.freeze(m))).
#
#   scripts/rewrite.sh profile|rewrite MODEL.pt...
# Settings from the environment (the Makefile passes them): BIN, OUT, INPUTS, THREADS,
# PROFILE_FLAGS, PLAN_FLAGS, REWRITE_FLAGS, RUNS, SHAPES (other input shapes the plan must hold
# at, e.g. "8x3x224x224 1x3x320x320": each profiled, and passed to xsched --shape-profile),
# LOAD_LIBRARY (libraries of custom ops the model calls, passed as --load-library to every tool
# that loads it; torchvision's is found by the tools themselves).
set -euo pipefail
step=$1
shift
BIN=${BIN:-build/bin}
OUT=${OUT:-data/tmp}
THREADS=${THREADS:-1}
RUNS=${RUNS:-30}
read -r -a inputs <<<"${INPUTS:-}"
read -r -a profile_flags <<<"${PROFILE_FLAGS---freeze}"
read -r -a plan_flags <<<"${PLAN_FLAGS---form fast}"
read -r -a rewrite_flags <<<"${REWRITE_FLAGS---freeze}"
read -r -a shapes <<<"${SHAPES:-}"
libraries=()
for lib in ${LOAD_LIBRARY:-}; do
  libraries+=(--load-library "$lib")
done
mkdir -p "$OUT"
run() {
  echo "+ $*" >&2
  "$@"
}
for model in "$@"; do
  name=$(basename "$model" .pt)
  p="$OUT/$name"
  if [[ $step == profile ]]; then
    run "$BIN/xprof" "$model" "${inputs[@]}" "${libraries[@]}" --threads "$THREADS" "${profile_flags[@]}" \
      -o "$p.profile.json"
    run "$BIN/xcost" "$p.profile.json" -o "$p.cost.json" --report
    at=()
    for shape in "${shapes[@]}"; do
      run "$BIN/xprof" "$model" --input-shape "$shape" "${libraries[@]}" --threads "$THREADS" "${profile_flags[@]}" \
        -o "$p.at-$shape.profile.json"
      at+=(--shape-profile "$p.at-$shape.profile.json")
    done
    run "$BIN/xsched" --profile "$p.profile.json" --cost "$p.cost.json" "${at[@]}" \
      "${plan_flags[@]}" -o "$p.schedule.json" --explain
  else
    run "$BIN/xrewrite" "$model" "${inputs[@]}" "${libraries[@]}" --schedule "$p.schedule.json" \
      "${rewrite_flags[@]}" -o "$p.opt.pt" --diff
    # What it gains, side by side in one process, interleaved, at the profile's thread count.
    run "$BIN/xbench-peer" "$model" "$p.opt.pt" "${inputs[@]}" "${libraries[@]}" --threads "$THREADS" --runs "$RUNS"
  fi
done
