#!/usr/bin/env bash
# Bad input gets one compiler-style line and exit code 2; nothing half-written, nothing lost.
source "$(dirname "$0")/lib.sh"

model="$XALLOC_SAMPLES/mixer.pt"
xprof "$model" -o "$WORK/profile.json" "${QUICK[@]}" --no-consumers
xcost "$WORK/profile.json" -o "$WORK/cost.json"
xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" -o "$WORK/schedule.json" \
  2>"$WORK/schedule.err"
[[ ! -s "$WORK/schedule.err" ]] || fail "xsched warned on a fresh profile: $(cat "$WORK/schedule.err")"
# A cost table from an older xprof, whose conversions were timed without their fresh outputs.
python3 - "$WORK/cost.json" "$WORK/old-cost.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert any("allocation_ms" in e for e in c["conversion_cost_table"]), "no allocation_ms measured"
for e in c["conversion_cost_table"]:
    e.pop("allocation_ms", None)
    e.pop("allocation_spread_ms", None)
json.dump(c, open(sys.argv[2], "w"))
PY
xsched --profile "$WORK/profile.json" --cost "$WORK/old-cost.json" -o /dev/null 2>"$WORK/old.err"
grep -q "old-cost.json: warning: its conversion costs leave out what a fresh output costs" \
  "$WORK/old.err" || fail "no warning for an old cost table: $(cat "$WORK/old.err")"

# Missing and wrong models.
expect_error 2 '^missing\.pt: error: cannot read file' -- xprof missing.pt -o "$WORK/p.json"
echo "not a model" >"$WORK/text.pt"
expect_error 2 'text\.pt: error: not a TorchScript model' -- xprof "$WORK/text.pt"
expect_error 2 'error: op prim::fork .* is not supported by xprof' -- xprof "$XALLOC_SAMPLES/forked.pt" "${QUICK[@]}"
expect_error 2 "error: the model has no method 'predict'" -- xprof "$model" --method predict
expect_error 2 'failed on the example inputs' -- xprof "$model" --input-shape 3x3 "${QUICK[@]}"
expect_error 2 "cannot read '4xq' as a shape" -- xprof "$model" --input-shape 4xq
# Inputs libtorch cannot make: said as the user's input (its name, dtype and shape), never as an
# internal error; no size of 0, no infinite range, an integer range with an integer in it.
expect_error 2 "^xprof: error: --input-shape: '0x4' has a size of 0" -- xprof "$model" --input-shape 0x4
expect_error 2 "^xprof: error: --input-range: cannot read '0:inf' as LOW:HIGH, two finite numbers" -- \
  xprof "$model" --input-shape 4x4 --input-range 0:inf
expect_error 2 '^xprof: error: input0 \(int64, 4x4\): the range 0.2:0.7 holds no integer$' -- \
  xprof "$model" --input-shape 4x4 --input-dtype int64 --input-range 0.2:0.7
expect_error 2 '^xprof: error: cannot make the input input0 \(float32, 3037000500x3037000500x3\): Storage size calculation overflowed' -- \
  xprof "$model" --input-shape 3037000500x3037000500x3
expect_error 2 '^xprof: error: cannot make the input input0 \(float16, 4x4\): to is out of bounds' -- \
  xprof "$model" --input-shape 4x4 --input-dtype float16 --input-range 0:1e300
[[ ! -e "$WORK/p.json" ]] || fail "a failed xprof left an output file"
# Inputs --input-shape cannot describe: an int, a dict. The message says to use --input-file,
# which then works. (TorchScript reads the classes' source: a file, not stdin.)
cat >"$WORK/inputs.py" <<'PY'
import sys, torch, warnings
from typing import Dict, List
class Scaled(torch.nn.Module):
    def forward(self, x, n: int):
        return x.t().contiguous() * n
class Keyed(torch.nn.Module):
    def forward(self, d: Dict[str, torch.Tensor]):
        return d["a"].t() @ d["b"]
class KeyedOne(torch.nn.Module):
    def forward(self, d: Dict[str, torch.Tensor]):
        return d["a"].t().contiguous() + 1
class Warned(torch.nn.Module):
    def forward(self, x):
        warnings.warn("x is ignored in scripting")
        return x.t().contiguous() + 1
class Listed(torch.nn.Module):  # like a detection model's images: List[Tensor]
    def forward(self, images: List[torch.Tensor]):
        return images[0].t() @ images[-1]
torch.jit.script(Scaled()).save(sys.argv[1] + "/scaled.pt")
torch.jit.script(Keyed()).save(sys.argv[1] + "/keyed.pt")
torch.jit.script(KeyedOne()).save(sys.argv[1] + "/keyed-one.pt")
torch.jit.script(Listed()).save(sys.argv[1] + "/listed.pt")
torch.jit.script(Warned()).save(sys.argv[1] + "/warned.pt")
torch.save((torch.randn(3, 3), torch.randn(3, 3)), sys.argv[1] + "/listed2.in")
torch.save((torch.randn(3, 3),), sys.argv[1] + "/listed1.in")
# As users save a detection model's images: a list of one, of two sizes, nested in a tuple.
torch.save([torch.randn(3, 3)], sys.argv[1] + "/list1.in")
torch.save(([torch.randn(3, 3), torch.randn(3, 3)],), sys.argv[1] + "/nested.in")
torch.save(([torch.randn(3, 3)],), sys.argv[1] + "/nested1.in")
torch.save({"a": torch.randn(3, 3), "b": torch.randn(3, 3)}, sys.argv[1] + "/keyed-bare.in")
torch.save((torch.randn(4, 8), 3), sys.argv[1] + "/scaled.in")
torch.save(({"a": torch.randn(3, 3), "b": torch.randn(3, 3)},), sys.argv[1] + "/keyed.in")
torch.save(({"a": torch.randn(3, 3)},), sys.argv[1] + "/keyed1.in")
torch.save((torch.randn(4, 8), 3.5), sys.argv[1] + "/scaled-float.in")
PY
"$XALLOC_PYTHON" "$WORK/inputs.py" "$WORK"
expect_error 2 "scaled\.pt: error: 'forward' needs input 'n' of type int, which --input-shape cannot describe: .* --input-file" -- \
  xprof "$WORK/scaled.pt" --input-shape 4x8 -o "$WORK/p.json"
expect_error 2 "error: 'forward' takes input 'n' of type int, but was given Tensor" -- \
  xprof "$WORK/scaled.pt" --input-shape 4x8 --input-shape 1 -o "$WORK/p.json"
expect_error 2 "keyed\.pt: error: 'forward' needs input 'd' of type Dict\[str, Tensor\]" -- xprof "$WORK/keyed.pt" -o "$WORK/p.json"
[[ ! -e "$WORK/p.json" ]] || fail "a failed xprof left an output file"
xprof "$WORK/scaled.pt" --input-file "$WORK/scaled.in" -o "$WORK/scaled.json" "${QUICK[@]}" || fail "int input from --input-file"
xprof "$WORK/keyed.pt" --input-file "$WORK/keyed.in" -o "$WORK/keyed.json" "${QUICK[@]}" || fail "dict input from --input-file"
# Values for a List[Tensor] input that fit only together are that list: a file of two tensors or
# of one, or one --input-shape per element. They are still checked against the element type.
for f in listed2 listed1 list1 nested nested1; do
  xprof "$WORK/listed.pt" --input-file "$WORK/$f.in" -o "$WORK/$f.json" "${QUICK[@]}" || fail "$f: a list input from --input-file"
done
# The list of one is that one tensor: the same profile as the tuple of one.
"$XALLOC_PYTHON" - "$WORK/listed1.json" "$WORK/list1.json" "$WORK/nested1.json" <<'PY' ||
import json, sys
sizes = [sorted(tuple(r["sizes"]) for r in json.load(open(f))["records"]) for f in sys.argv[1:]]
assert sizes[0] == sizes[1] == sizes[2] and sizes[0], sizes
PY
  fail "a list of one read otherwise than a tuple of one"
xprof "$WORK/listed.pt" --input-shape 3x3 --input-shape 3x3 -o "$WORK/listed.json" "${QUICK[@]}" ||
  fail "a list input from --input-shape"
expect_error 2 "listed\.pt: error: 'forward' takes 1 input but 2 were given" -- \
  xprof "$WORK/listed.pt" --input-file "$WORK/scaled.in" -o "$WORK/p.json"
# A model's warnings: one line each, once, from xprof (which runs it many times) and from
# xrewrite (whose check runs it through the JIT, which used to print them through glog).
xprof "$WORK/warned.pt" --input-shape 4x8 "${QUICK[@]}" 2>"$WORK/warned.log" | xcost |
  xsched -o "$WORK/warned.json" || fail "warned: $(cat "$WORK/warned.log")"
# The existing conversion removed, whatever the timings said: xrewrite then has a model to check
# (with nothing to change it writes the input as it is and runs nothing).
python3 - "$WORK/warned.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conv = [d for d in s["decisions"] if d["anchor"]["op"] == "aten::contiguous"]
assert conv, [d["anchor"] for d in s["decisions"]]
conv[0]["action"] = "remove"
json.dump(s, open(sys.argv[1], "w"))
PY
xrewrite "$WORK/warned.pt" -s "$WORK/warned.json" -o "$WORK/warned.opt.pt" 2>>"$WORK/warned.log" ||
  fail "warned: xrewrite: $(cat "$WORK/warned.log")"
[[ $(grep -c '^warning: the model warns: x is ignored in scripting$' "$WORK/warned.log") == 2 ]] ||
  fail "warned: not one line per tool: $(cat "$WORK/warned.log")"
! grep -q 'InitGoogleLogging\|UserWarning' "$WORK/warned.log" || fail "warned: $(cat "$WORK/warned.log")"
# A one-element dict or list (Python pickles them with SETITEM / APPEND, which libtorch 1.13's
# unpickler does not read) is read as Python wrote it: the model is given that dict.
xprof "$WORK/keyed-one.pt" --input-file "$WORK/keyed1.in" -o "$WORK/keyed1.json" "${QUICK[@]}" ||
  fail "a dict of one element from --input-file"
"$XALLOC_PYTHON" -c 'import json, sys; assert [3, 3] in [r["sizes"] for r in json.load(open(sys.argv[1]))["records"]]' \
  "$WORK/keyed1.json" || fail "keyed1: the dict's tensor was not run"
xprof "$WORK/keyed.pt" --input-file "$WORK/keyed-bare.in" -o "$WORK/keyed-bare.json" "${QUICK[@]}" ||
  fail "a dict saved bare (not in a tuple) from --input-file"
printf 'not a pickle' >"$WORK/junk.in"
expect_error 2 "junk\.in: error: cannot read inputs \(expected values saved with torch\.save: a tensor, or a tuple, list or dict of them, one per argument\)" -- \
  xprof "$WORK/keyed.pt" --input-file "$WORK/junk.in" -o "$WORK/p.json"
expect_error 2 "scaled\.pt: error: 'forward' takes input 'n' of type int, but was given float" -- \
  xprof "$WORK/scaled.pt" --input-file "$WORK/scaled-float.in" -o "$WORK/p.json"

# Malformed documents: the position or the JSON Pointer of the problem.
head -c 300 "$WORK/profile.json" >"$WORK/truncated.json"
expect_error 2 'truncated\.json:[0-9]+:[0-9]+: error: malformed JSON' -- xcost "$WORK/truncated.json" -o "$WORK/c.json"
sed 's/"schema_version": 2/"schema_version": 7/' "$WORK/profile.json" >"$WORK/v7.json"
expect_error 2 'v7\.json: /schema_version: error: unsupported schema_version 7' -- xcost "$WORK/v7.json"
schema_rejects "$WORK/v7.json"
expect_error 2 "cost\.json: /schema: error: unknown schema 'xalloc.cost', expected 'xalloc.profile'" -- xcost "$WORK/cost.json"
python3 - "$WORK/profile.json" "$WORK/badtype.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["records"][1]["strides"] = "wide"; json.dump(d, open(sys.argv[2], "w"))
PY
expect_error 2 'badtype\.json: /records/1/strides: error: expected an array, got a string' -- xcost "$WORK/badtype.json"
schema_rejects "$WORK/badtype.json"
# xcost --train: only timings of the same machine and thread count, and only with layouts.
python3 - "$WORK/profile.json" "$WORK/threads8.json" "$WORK/nolayouts.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["device"]["threads"] = 8; json.dump(d, open(sys.argv[2], "w"))
d = json.load(open(sys.argv[1])); d["conversion_cost_table"] = []; json.dump(d, open(sys.argv[3], "w"))
PY
expect_error 2 "threads8\.json: error: --train: measured on .*8 threads\), the profile on .*; fit only on timings of the same machine" -- \
  xcost "$WORK/profile.json" --train "$WORK/threads8.json" -o "$WORK/c.json"
expect_error 2 'nolayouts\.json: error: no measured layouts to fit on' -- xcost "$WORK/profile.json" --train "$WORK/nolayouts.json" -o "$WORK/c.json"
expect_error 2 '^missing\.json: error: cannot read file' -- xcost "$WORK/profile.json" --train missing.json -o "$WORK/c.json"
[[ ! -e "$WORK/c.json" ]] || fail "a failed xcost left an output file"
python3 - "$WORK/schedule.json" "$WORK/noaction.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["decisions"].append({"value_id": 0, "producer": 0, "consumers": []}); json.dump(d, open(sys.argv[2], "w"))
PY
expect_error 2 "noaction\.json: /decisions/[0-9]+/action: error: missing required field 'action'" -- xrewrite "$model" -s "$WORK/noaction.json" -o "$WORK/o.pt"
schema_rejects "$WORK/noaction.json"
[[ ! -e "$WORK/c.json" && ! -e "$WORK/o.pt" ]] || fail "a failed run left an output file"

# An existing output survives a failed run untouched.
echo keep >"$WORK/existing.json"
expect_error 2 'malformed JSON' -- xcost "$WORK/truncated.json" -o "$WORK/existing.json"
[[ $(cat "$WORK/existing.json") == keep ]] || fail "a failed run clobbered its output"

# Streams without the needed document, and usage errors.
expect_error 2 "<stdin>: /schema: error: unknown schema 'xalloc.profile', expected 'xalloc.cost'" -- bash -c "cat '$WORK/profile.json' | xsched"
expect_error 2 "<stdin>: error: no 'xalloc.cost' document in the input" -- bash -c "cat '$WORK/profile.json' '$WORK/profile.json' | xsched"
expect_error 2 'xsched: error: --memory-budget' -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --memory-budget lots
expect_error 2 'impossible: the smallest feasible budget is [0-9]+ bytes' -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --memory-budget 1
expect_error 2 'xsched: error: --window-safety must be in \(0, 1\]' -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --window-safety 1.5
expect_error 2 "xsched: error: --form must be 'portable' or 'fast', not 'quick'" -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --form quick
# A tolerance is a number above 0 and at most 1e-2; --exact is the tolerance of bit-identical
# outputs. A schedule file may not set more either (it used to write a model 32% off, exit 0).
for bad in 0 -1e-4 nan inf 0.5 1e300; do
  expect_error 2 "xsched: error: --tolerance must be a number above 0 and at most 0.01 \(--exact for bit-identical outputs\), not" -- \
    xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --tolerance "$bad" -o "$WORK/t.json"
  expect_error 2 "xrewrite: error: --tolerance must be a number above 0 and at most 0.01" -- \
    xrewrite "$model" -s "$WORK/schedule.json" --tolerance "$bad" -o "$WORK/t.pt"
done
python3 - "$WORK/schedule.json" "$WORK/loose.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["summary"]["tolerance"] = 1e300
json.dump(s, open(sys.argv[2], "w"))
PY
expect_error 2 "loose.json: /summary/tolerance: error: a schedule's tolerance is at most 0.01" -- \
  xrewrite "$model" -s "$WORK/loose.json" -o "$WORK/t.pt"
expect_error 2 "tolerance" -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --tolerance lots -o "$WORK/t.json"
expect_error 2 "exclude" -- xsched --profile "$WORK/profile.json" --cost "$WORK/cost.json" --tolerance 1e-3 --exact -o "$WORK/t.json"
expect_error 2 "exclude" -- xrewrite "$model" -s "$WORK/schedule.json" --tolerance 1e-3 --exact -o "$WORK/t.pt"
expect_error 2 "^xrewrite: error: --no-fusion 'squeeze-excite': no such fusion \(the fusions are channel_shuffle, cat_shuffle, squeeze_excite," -- \
  xrewrite "$model" -s "$WORK/schedule.json" --no-fusion squeeze-excite -o "$WORK/t.pt"
[[ ! -e $WORK/t.pt ]] || fail "--no-fusion with a bad name wrote a model"
[[ ! -e "$WORK/t.json" && ! -e "$WORK/t.pt" ]] || fail "a refused tolerance left an output"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
c = json.load(open(w + "/cost.json")); c["model"]["sha256"] = "ab" * 32; c["model"]["path"] = "other.pt"
json.dump(c, open(w + "/foreign.json", "w"))
c = json.load(open(w + "/cost.json")); c["conversion_cost_table"] = [dict(c["conversion_cost_table"][0], median_ms=-1)] if c["conversion_cost_table"] else [{"median_ms": -1}]
json.dump(c, open(w + "/negcost.json", "w"))
p = json.load(open(w + "/profile.json")); p["gpu_idle_events"] = [{"id": 0, "before_op_id": 99999, "after_op_id": 0, "duration_ms": 1, "start_ms": 0, "spare_cores": 1, "device": "cpu", "kind": "host-gap"}]
json.dump(p, open(w + "/badwindow.json", "w"))
PY
expect_error 2 'the profile is of .*mixer\.pt .* but the cost model was fitted on other\.pt .*--foreign-cost' -- xsched --profile "$WORK/profile.json" --cost "$WORK/foreign.json"
xsched --profile "$WORK/profile.json" --cost "$WORK/foreign.json" --foreign-cost -o "$WORK/foreign-schedule.json" || fail "--foreign-cost was refused"
expect_error 2 'negcost\.json: /conversion_cost_table/0/median_ms: error: expected a non-negative number, got -1' -- xsched --profile "$WORK/profile.json" --cost "$WORK/negcost.json"
expect_error 2 'badwindow\.json: /gpu_idle_events/0/before_op_id: error: unknown op id 99999' -- xsched --profile "$WORK/badwindow.json" --cost "$WORK/cost.json"
expect_error 2 'mixer\.pt: error: -o names the input model' -- xrewrite "$model" -s "$WORK/schedule.json" -o "$model"
expect_error 2 'xrewrite: error: no output' -- xrewrite "$model" -s "$WORK/schedule.json"
expect_error 2 'no schedule stored' -- xrewrite --show "$model"
# xcost predict: bad layouts and a bad model name.
echo '{"sizes":[4,-1],"strides":[1,4],"dtype":"float32"}' >"$WORK/neg.jsonl"
expect_error 2 '<stdin>:1: /sizes/1: error: expected a non-negative size' -- bash -c "xcost predict --cost '$WORK/cost.json' <'$WORK/neg.jsonl'"
echo '{"sizes":[4,4],"strides":[1],"dtype":"float32"}' >"$WORK/short.jsonl"
expect_error 2 '<stdin>:1: /strides: error: expected 2 strides \(one per dimension of sizes\), got 1' -- bash -c "xcost predict --cost '$WORK/cost.json' <'$WORK/short.jsonl'"
expect_error 2 "xcost: error: --model: 'best' is not one of auto, stride, classic" -- bash -c "xcost predict --cost '$WORK/cost.json' --model best </dev/null"

# xsched memplan: bad tensor lists.
plan() { echo "$1" >"$WORK/tensors.json"; }
plan '{"tensors":[{"id":"a","size":-5,"first_op":0,"last_op":1}]}'
expect_error 2 'tensors\.json: /tensors/0/size: error: expected a non-negative integer' -- xsched memplan "$WORK/tensors.json"
plan '{"tensors":[{"id":"a","size":5,"first_op":4,"last_op":1}]}'
expect_error 2 '/tensors/0/last_op: error: last_op 1 is before first_op 4' -- xsched memplan "$WORK/tensors.json"
plan '{"tensors":[{"id":1,"size":5,"first_op":0,"last_op":1},{"id":"1","size":5,"first_op":0,"last_op":1}]}'
expect_error 2 "/tensors/1/id: error: duplicate tensor id '1'" -- xsched memplan "$WORK/tensors.json"
plan 'size: 5'
expect_error 2 'tensors\.json:1:1: error: malformed JSON' -- xsched memplan "$WORK/tensors.json"
plan '{"tensors":[{"id":"p","size":100,"first_op":0,"last_op":2,"offset":0},{"id":"q","size":100,"first_op":1,"last_op":2,"offset":64}]}'
expect_error 2 "pinned tensors 'p' and 'q' are alive at the same time and overlap" -- xsched memplan "$WORK/tensors.json"
expect_error 2 'out of memory: the plan needs [0-9]+ bytes .* but the budget is 1024 bytes' -- xsched memplan "$WORK/profile.json" --budget 1K

rc=0
xprof --no-such-flag >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "unknown flag should exit 2, got $rc"

# --help and --version exit 0.
for tool in xprof xcost xsched xrewrite; do
  "$tool" --help >/dev/null || fail "$tool --help"
  "$tool" --version | grep -q "x-allocator" || fail "$tool --version"
done

# xprof's and xrewrite's fronts answer their command lines without their cores (no libtorch): a
# copy of each front alone says the same as with its core beside it, and only a real job needs
# the core.
mkdir -p "$WORK/fronts"
cp "$XALLOC_BIN/xprof" "$XALLOC_BIN/xrewrite" "$WORK/fronts/"
for tool in xprof xrewrite; do
  diff <("$tool" --help) <("$WORK/fronts/$tool" --help) >/dev/null || fail "$tool --help differs alone"
  diff <("$tool-core" --help) <("$WORK/fronts/$tool" --help) >/dev/null ||
    fail "$tool's --help is not $tool-core's"
done
diff <(xprof run --help) <("$WORK/fronts/xprof" run --help) >/dev/null || fail "xprof run --help differs alone"
expect_error 2 'The following argument was not expected: --no-such-flag|--no-such-flag' -- "$WORK/fronts/xprof" m.pt --no-such-flag
expect_error 2 "^xprof: error: --sweep-max-bytes: cannot read '1' as a size of at least 4K$" -- \
  "$WORK/fronts/xprof" m.pt --sweep-max-bytes 1
expect_error 2 "^xprof run: error: unknown option '--no-db'" -- "$WORK/fronts/xprof" run --no-db -- /bin/true
expect_error 2 "^nowhere/x\\.json: error: cannot write: folder '[^']*nowhere' does not exist$" -- \
  "$WORK/fronts/xprof" m.pt -o nowhere/x.json
expect_error 2 '^xrewrite: error: no output: give -o OUT\.pt' -- "$WORK/fronts/xrewrite" m.pt -s s.json
expect_error 2 '^xprof: error: cannot run .*/fronts/xprof-core: No such file or directory$' -- \
  "$WORK/fronts/xprof" "$model" --no-db -q -o "$WORK/p.json"
echo "cli.errors: ok"
