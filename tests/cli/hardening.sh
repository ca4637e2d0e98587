#!/usr/bin/env bash
# Outputs that never clobber and inputs that cannot crash the tools (issue "Hardening"): -o onto
# a FIFO or a link, onto the input by another spelling, over a 0600 file; a write killed by
# SIGTERM; a rewrite that changes nothing; output folders checked before the work; documents
# nested too deep, numbers beyond a double, sums that overflow; flags that are not finite.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
model="$XALLOC_SAMPLES/mixer.pt"
xprof "$model" -o profile.json "${QUICK[@]}" --no-consumers
xcost profile.json -o cost.json
xsched --profile profile.json --cost cost.json -o schedule.json
cp "$model" m.pt
python3 - schedule.json none.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["decisions"] = []
json.dump(s, open(sys.argv[2], "w"))
PY

# Nothing to change: the output is the input model with its methods and submodules as they were
# (not inlined), and the schedule stored.
xrewrite m.pt -s none.json -o same.pt -q
"$XALLOC_PYTHON" - m.pt same.pt <<'PY' || fail "a rewrite with no decision changed the model"
import sys, torch
a, b = torch.jit.load(sys.argv[1]), torch.jit.load(sys.argv[2])
code = lambda m: [(n, s.code) for n, s in m.named_modules() if hasattr(s, "code")]
assert code(a) == code(b), "the code changed"
sa, sb = a.state_dict(), b.state_dict()
assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), "weights changed"
PY
xrewrite --show same.pt >/dev/null || fail "no schedule stored with the unchanged model"

# -o naming the input by another spelling is refused, and the input is untouched.
cp m.pt m.orig
expect_error 2 'm\.pt: error: -o names the input model' -- xrewrite m.pt -s none.json -o ./m.pt
expect_error 2 'error: -o names the input model' -- xrewrite m.pt -s none.json -o "$WORK/../$(basename "$WORK")/m.pt"
cmp -s m.pt m.orig || fail "the input model was overwritten"

# A 0600 file replaced stays 0600; a link stays a link and its target gets the model; a FIFO
# stays a FIFO and its reader gets the model.
# (--freeze: the model changes, so the rewritten model itself is what is written.)
cp m.pt private.pt && chmod 600 private.pt
xrewrite m.pt -s schedule.json -o private.pt -q --freeze
[[ $(stat -c %a private.pt) == 600 ]] || fail "-o changed the mode to $(stat -c %a private.pt)"
mkdir -p target && ln -s target/real.pt link.pt
xrewrite m.pt -s schedule.json -o link.pt -q --freeze
[[ -L link.pt && -s target/real.pt ]] || fail "-o replaced the link: $(ls -l link.pt target)"
mkfifo pipe.pt
cat pipe.pt >from-pipe.pt &
reader=$!
xrewrite m.pt -s schedule.json -o pipe.pt -q --freeze
wait "$reader"
[[ -p pipe.pt ]] || fail "-o replaced the FIFO with a regular file"
[[ $(head -c 2 from-pipe.pt) == PK ]] || fail "the FIFO's reader did not get the model"

# Output folders are checked before the work: at once, one line, nothing made.
expect_error 2 "error: cannot write: folder '.*nowhere' does not exist" -- xrewrite m.pt -s schedule.json -o nowhere/out.pt
expect_error 2 "error: cannot write: folder '.*nowhere' does not exist" -- xprof "$model" -o nowhere/p.json "${QUICK[@]}"
expect_error 2 'error: is a directory' -- xsched --profile profile.json --cost cost.json -o target
expect_error 2 "error: cannot write: folder '.*nowhere' does not exist" -- xcost profile.json -o nowhere/c.json

# SIGTERM while xrewrite verifies (from memory: it keeps no temp file, cli.trust kills it with
# SIGKILL too): nothing is left, and nothing is written.
mkdir tmp
TMPDIR="$WORK/tmp" xrewrite m.pt -s schedule.json -o killed.pt -q --freeze --verify-runs 100000 &
pid=$!
sleep 2
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc -eq 143 ]] || fail "xrewrite did not end by SIGTERM (exit $rc)"
[[ -z $(ls -A tmp) ]] || fail "SIGTERM left temp files: $(ls -A tmp)"
[[ ! -e killed.pt ]] || fail "a killed xrewrite wrote its output"
[[ -z $(find . -name '*.tmp.*') ]] || fail "temp files left: $(find . -name '*.tmp.*')"

# Documents nested deeper than any of ours, and a number beyond a double: one line, exit 2.
python3 -c 'print("[" * 100000 + "]" * 100000)' >deep.json
expect_error 2 'deep\.json:1:257: error: JSON nested deeper than 256 levels' -- xsched --profile deep.json --cost cost.json
expect_error 2 'deep\.json:1:257: error: JSON nested deeper' -- xcost deep.json
sed 's/"duration_ms": *[0-9.e+-]*/"duration_ms": 1e999/' profile.json >huge.json
grep -q 1e999 huge.json || fail "no duration to replace"
expect_error 2 'huge\.json:[0-9]+:[0-9]+: error: number 1e999 is out of range' -- xsched --profile huge.json --cost cost.json
# Durations that add up beyond a double: refused, never written as null.
sed 's/"duration_ms": *[0-9.e+-]*/"duration_ms": 1e307/' profile.json >sum.json
expect_error 2 'error: cannot write /.*: the number is not finite' -- xsched --profile sum.json --cost cost.json -o sum-schedule.json
[[ ! -e sum-schedule.json ]] || fail "a schedule was written with a non-finite number"

# Flags that are not finite numbers.
expect_error 2 'must be finite non-negative numbers' -- xsched --profile profile.json --cost cost.json --z inf
expect_error 2 'must be finite non-negative numbers' -- xsched --profile profile.json --cost cost.json --min-relative-gain nan
# The schema validator users run: an empty file, deep nesting and malformed text are invalid
# (one line each, exit 1, no traceback); a byte order mark is skipped, as the tools skip it.
: >empty.json
expect_error 1 '^empty\.json: error: no JSON document' -- "$XALLOC_PYTHON" "$XALLOC_SOURCE/scripts/validate-schema.py" empty.json
expect_error 1 '^deep\.json:1:257: error: JSON nested deeper than 256 levels' -- "$XALLOC_PYTHON" "$XALLOC_SOURCE/scripts/validate-schema.py" deep.json
printf '{"schema": ' >cut.json
expect_error 1 '^cut\.json:1:12: error: malformed JSON' -- "$XALLOC_PYTHON" "$XALLOC_SOURCE/scripts/validate-schema.py" cut.json
{ printf '\xef\xbb\xbf'; cat cost.json; } >bom.json
validate bom.json || fail "a byte order mark made a valid document invalid"
xsched --profile profile.json --cost bom.json -o /dev/null || fail "xsched refuses a byte order mark"
echo "cli.hardening: ok"
