#!/usr/bin/env bash
# End-to-end: each model against its rewrites under four policies, in one interleaved run:
# xsched's plan in the portable form (async as sync) and in the fast form (async on a side
# worker), "contiguous everywhere" and "strip all contiguous". Raw samples: $OUT/e2e.jsonl.
set -euo pipefail
BIN=${BIN:-build/bin}
SAMPLES=${SAMPLES:-build/samples}
OUT=${OUT:-data/tmp/bench}
RUNS=${RUNS:-50}
MODELS=${MODELS:-minigpt mixer redundant attention shufflecnn overlap}
export PATH="$BIN:$PATH"
here=$(dirname "$0")
mkdir -p "$OUT"
rm -f "$OUT/e2e.jsonl"
for name in $MODELS; do
  model="$SAMPLES/$name.pt"
  o="$OUT/$name"
  xprof "$model" -q -o "$o.profile.json"
  xcost "$o.profile.json" | xsched -o "$o.schedule.json"
  xrewrite "$model" -s "$o.schedule.json" -o "$o.portable.pt" -q
  xrewrite "$model" -s "$o.schedule.json" -o "$o.fast.pt" --form fast -q
  variants=("portable=$o.portable.pt" "fast=$o.fast.pt")
  for policy in contiguous strip; do
    python3 "$here/policies.py" "$policy" "$o.schedule.json" "$o.$policy.json" 2>/dev/null
    if xrewrite "$model" -s "$o.$policy.json" -o "$o.$policy.pt" -q 2>"$o.$policy.err"; then
      label=$([[ $policy == contiguous ]] && echo contiguous-everywhere || echo strip-all)
      variants+=("$label=$o.$policy.pt")
    else
      echo "$name: $policy policy not applicable: $(tail -1 "$o.$policy.err")"
    fi
  done
  python3 - "$o.schedule.json" "$name" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); c = s["summary"]["counts"]
hidden = sum(d["predicted_cost_ms"] for d in s["decisions"] if d["action"] == "async")
print(f"== {sys.argv[2]}: {c['sync']} sync, {c['async']} async, {c['remove']} remove, "
      f"{c['none']} none; predicted {s['summary']['predicted_time_before_ms']:.3f} -> "
      f"{s['summary']['predicted_time_after_ms']:.3f} ms; conversion time hidden by async: "
      f"{hidden:.4f} ms")
PY
  xbench-e2e --name "$name" "$model" "${variants[@]}" --runs "$RUNS" --json "$OUT/e2e.jsonl"
done
echo "raw samples: $OUT/e2e.jsonl"
