#!/usr/bin/env bash
# --load-library: a model that calls ops from a library of custom ops (TORCH_LIBRARY, as
# torchvision's nms) is refused with a hint without it, and profiled, scheduled, rewritten and
# verified with it; a missing or broken library is one error line and exit 2.
source "$(dirname "$0")/lib.sh"
: "${XALLOC_TEST_OPS:?set by CTest}"
cd "$WORK"
cat >make_model.py <<'PY'
import sys, torch
torch.ops.load_library(sys.argv[1])
torch.manual_seed(0)

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, 256))

    def forward(self, x):
        y = torch.nn.functional.linear(x, self.w)
        return torch.ops.xtest.scaled_row_sum(y.t(), 0.5)

torch.jit.save(torch.jit.script(M().eval()), sys.argv[2])
PY
"$XALLOC_PYTHON" make_model.py "$XALLOC_TEST_OPS" model.pt  # scripting reads the source file
IN=(--input-shape 64x256)

expect_error 2 'model.pt: error: cannot load TorchScript model: Unknown builtin op: xtest::scaled_row_sum; load the library that defines it with --load-library FILE' \
  -- xprof model.pt "${IN[@]}" "${QUICK[@]}"
expect_error 2 '^xprof: error: /nonexistent/ops.so: cannot load op library: no such file|^/nonexistent/ops.so: error: cannot load op library: no such file' \
  -- xprof model.pt --load-library /nonexistent/ops.so "${IN[@]}" "${QUICK[@]}"
expect_error 2 '^\.: error: cannot load op library: not a regular file' \
  -- xprof model.pt --load-library . "${IN[@]}" "${QUICK[@]}"
echo "not a library" >bad.so
expect_error 2 'bad.so: error: cannot load op library: .*(invalid ELF header|too short|file too short)' \
  -- xprof model.pt --load-library bad.so "${IN[@]}" "${QUICK[@]}"
[[ ! -e profile.json ]] || fail "an error left a profile"

xprof model.pt --load-library "$XALLOC_TEST_OPS" "${IN[@]}" "${QUICK[@]}" -o profile.json
grep -Eq '"kind": *"xtest::scaled_row_sum"' profile.json || fail "the custom op is not in the profile"
# The custom op is re-run with both layouts of its transposed input, as an ATen op is.
"$XALLOC_PYTHON" - profile.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
kinds = {o["id"]: o["kind"] for o in p["ops"]}
reads = [c for r in p["records"] if not r["contiguous"] for c in r["consumers"]
         if kinds[c["op_id"]] == "xtest::scaled_row_sum"]
assert reads and all(c["measured"] for c in reads), reads
PY
xcost profile.json -o cost.json
xsched --profile profile.json --cost cost.json -o schedule.json
expect_error 2 'Unknown builtin op: xtest::scaled_row_sum; load the library' \
  -- xrewrite model.pt -s schedule.json "${IN[@]}" -o out.pt -q
[[ ! -e out.pt ]] || fail "a failed rewrite left a model"
xrewrite model.pt -s schedule.json --load-library "$XALLOC_TEST_OPS" "${IN[@]}" -o out.pt -q
xrewrite out.pt -s schedule.json --load-library "$XALLOC_TEST_OPS" "${IN[@]}" --check -q ||
  fail "a second rewrite would change the model"

# Side by side: xbench-latency needs the library too, and runs the fast form's xalloc:: ops
# (x-allocator's own runtime) without being told.
"$XALLOC_PYTHON" -c 'import sys, torch; torch.save(torch.randn(64, 256), sys.argv[1])' in.pt
expect_error 2 'Unknown builtin op: xtest::scaled_row_sum; load the library' \
  -- xbench-latency model.pt out.pt --input-file in.pt --runs 30 --warmup 1
xrewrite model.pt -s schedule.json --load-library "$XALLOC_TEST_OPS" "${IN[@]}" -o fast.pt -q --form fast
xbench-latency model.pt fast.pt --load-library "$XALLOC_TEST_OPS" --input-file in.pt --runs 30 \
  --warmup 1 >bench.txt
grep -q 'outputs: bit-identical' bench.txt || fail "xbench-latency: $(cat bench.txt)"

# Independently of xrewrite's own check: the same bits from Python, with the library loaded.
"$XALLOC_PYTHON" - "$XALLOC_TEST_OPS" model.pt out.pt <<'PY'
import sys, torch
torch.ops.load_library(sys.argv[1])
a, b = torch.jit.load(sys.argv[2]), torch.jit.load(sys.argv[3])
for seed in range(3):
    torch.manual_seed(seed)
    x = torch.randn(64, 256)
    ya, yb = a(x), b(x)
    assert torch.equal(ya, yb) and ya.stride() == yb.stride(), "outputs differ"
# The archive's records sit under "archive/", not under a temporary file's name; unless
# nothing changed, and the output is the input model byte for byte.
import zipfile
roots = {n.split("/")[0] for n in zipfile.ZipFile(sys.argv[3]).namelist()}
same = open(sys.argv[2], "rb").read() == open(sys.argv[3], "rb").read()
assert roots == {"archive"} or same, roots
PY

# A model that calls torchvision's ops (a detector's torchvision::nms) needs no flag: every tool
# finds torchvision's library where Python keeps it, loads it, and says so once.
cat >make_nms.py <<'PY'
import sys, torch, torchvision
class Nms(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        keep = torchvision.ops.nms(boxes.abs().cumsum(1), scores, 0.5)
        return boxes.t().contiguous()[:, keep]
torch.jit.save(torch.jit.script(Nms().eval()), sys.argv[1])
PY
"$XALLOC_PYTHON" make_nms.py nms.pt
NMS_IN=(--input-shape 64x4 --input-shape 64)
xprof nms.pt "${NMS_IN[@]}" "${QUICK[@]}" -o nms.json 2>nms.err || fail "torchvision ops: $(cat nms.err)"
[[ $(grep -c 'nms\.pt: note: the model calls torchvision:: ops: loaded .*torchvision/_C.*\.so' nms.err) == 1 ]] ||
  fail "torchvision's library: not said once: $(cat nms.err)"
grep -Eq '"kind": *"torchvision::nms"' nms.json || fail "torchvision::nms is not in the profile"
xcost nms.json | xsched --profile nms.json -o nms-schedule.json
xrewrite nms.pt -s nms-schedule.json "${NMS_IN[@]}" -o nms.opt.pt -q || fail "xrewrite of a torchvision model"
# Told where it is not, the tools say so in one line.
XALLOC_TORCHVISION_LIBRARY=/nonexistent/_C.so expect_error 2 \
  '^/nonexistent/_C\.so: error: cannot load op library: no such file' -- xprof nms.pt "${NMS_IN[@]}" -o p.json
echo "cli.oplib: ok"
