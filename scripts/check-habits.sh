#!/usr/bin/env bash
# The repository's own pre-commit hooks (.pre-commit-config.yaml) stay runnable: the file
# parses, every hook's script exists, and the commit-message check refuses what it should.
# The suite runs it as style.habits.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=$(command -v /usr/bin/python3 || command -v python3)
"$python" - <<'PY'
import os, sys
import yaml
cfg = yaml.safe_load(open(".pre-commit-config.yaml"))
hooks = [h for r in cfg["repos"] for h in r["hooks"]]
assert hooks, "no hooks"
for h in hooks:
    script = h["entry"].split()[1]
    if not os.path.exists(script):
        sys.exit(f".pre-commit-config.yaml: error: hook {h['id']} runs {script}, which is missing")
PY
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Short subject\n\nThe why.\n' >"$tmp/good"
printf '%073d\n' 0 >"$tmp/long"
bash scripts/check-commit-msg.sh "$tmp/good"
! bash scripts/check-commit-msg.sh "$tmp/long" 2>/dev/null || {
  echo "check-commit-msg accepted a 73-character subject" >&2
  exit 1
}
echo "check-habits: the hooks are runnable"
