#!/usr/bin/env bash
# End-to-end: each model against its rewrites under four policies, in one interleaved run:
# xsched's plans for the portable form (aten::contiguous, fresh outputs) and for the fast form
# (the runtime: reused outputs, async on a side worker), "contiguous everywhere" and "strip all
# contiguous". Raw samples: $OUT/e2e.jsonl.
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
  xcost "$o.profile.json" -o "$o.cost.json"
  xsched --profile "$o.profile.json" --cost "$o.cost.json" -o "$o.schedule.json"
  xsched --profile "$o.profile.json" --cost "$o.cost.json" --form fast -o "$o.fast.schedule.json"
  xrewrite "$model" -s "$o.schedule.json" -o "$o.portable.pt" -q
  xrewrite "$model" -s "$o.fast.schedule.json" -o "$o.fast.pt" -q
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
  python3 - "$o.schedule.json" "$o.fast.schedule.json" "$name" <<'PY'
import json, sys
for path in sys.argv[1:3]:
    s = json.load(open(path)); c = s["summary"]["counts"]
    hidden = sum(d["predicted_cost_ms"] for d in s["decisions"] if d["action"] == "async")
    print(f"== {sys.argv[3]} ({s['summary']['form']}): {c['sync']} sync, {c['async']} async, "
          f"{c['remove']} remove, {c['none']} none; predicted "
          f"{s['summary']['predicted_time_before_ms']:.3f} -> "
          f"{s['summary']['predicted_time_after_ms']:.3f} ms; conversion time hidden by async: "
          f"{hidden:.4f} ms")
PY
  xbench-e2e --name "$name" "$model" "${variants[@]}" --runs "$RUNS" --json "$OUT/e2e.jsonl"
done
echo "raw samples: $OUT/e2e.jsonl"
