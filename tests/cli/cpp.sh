#!/usr/bin/env bash
# xrewrite on C++ sources (Clang): golden diff on a program against a mock of the libtorch
# headers (macros, templates, already converted, ambiguous and missing anchors included), a
# patch `git apply` takes, --check, --export-fixes applied by clang-apply-replacements,
# --in-place then an empty second diff, patched sources that still compile, and one program
# against Debian's real libtorch headers.
source "$(dirname "$0")/lib.sh"
src="$XALLOC_SOURCE/tests/cpp_rewrite"
cp -r "$src/input.cpp" "$src/schedule.json" "$src/mock" "$src/real.cpp" "$src/real-schedule.json" "$WORK/"
cd "$WORK"
FLAGS=(-- -std=c++17 -Imock)

xrewrite -s schedule.json --cpp input.cpp -q "${FLAGS[@]}" >patch.diff 2>warnings.txt
diff -u "$src/expected.diff" patch.diff || fail "the diff differs from the golden one"
grep -q 'input.cpp:26:1: warning: skipped: `TRANSPOSED(a)` is written by a macro' warnings.txt ||
  fail "macro not reported: $(cat warnings.txt)"
grep -q 'warning: skipped: `a.transpose(0, 1)` is inside a template' warnings.txt ||
  fail "template not reported"
grep -q 'warning: not found: no `q.transpose(0, 1)`' warnings.txt || fail "missing site not reported"
grep -q 'warning: ambiguous: 3 `a.transpose(0,1)` in mix and ordinal 7 does not pick one' warnings.txt ||
  fail "ambiguous anchor not reported: $(cat warnings.txt)"
git apply --check patch.diff || fail "git apply refuses the patch"

# The C++ path is xrewrite's front alone (no libtorch, no xrewrite-core): a copy of the front with
# no core beside it gives the same patch, and says plainly that it cannot run a model's rewrite.
mkdir -p front && cp "$XALLOC_BIN/xrewrite" front/
front/xrewrite -s schedule.json --cpp input.cpp -q "${FLAGS[@]}" >front.diff 2>/dev/null ||
  fail "the front alone cannot rewrite C++"
cmp -s patch.diff front.diff || fail "the front alone gives another patch"
expect_error 2 '^xrewrite: error: cannot run .*/front/xrewrite-core: No such file or directory$' -- \
  front/xrewrite "$XALLOC_SAMPLES/mixer.pt" -s schedule.json -o front/m.pt
diff <(xrewrite --help) <(xrewrite-core --help) >/dev/null || fail "the front's --help is not xrewrite-core's"

# A decision without an anchor (an op libtorch ran for a call of the program's; xsched leaves
# those `none`, a hand-edited schedule may not) is reported where that call is, never dropped.
"$XALLOC_PYTHON" - schedule.json unanchored.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["ops"].append({"id": 99, "kind": "aten::t", "source": {"file": "input.cpp", "line": 8, "col": 3,
                 "text": "auto y = fc(x);"}, "anchor": {"file": "", "function": "", "expr": "",
                 "op": "", "ordinal": 0, "line": 0, "col": 0}, "scope": "", "start_ms": 0,
                 "duration_ms": 0.01, "duration_spread_ms": 0, "noisy": False, "utilization": 1,
                 "inputs": [], "outputs": [99]})
d = dict(s["decisions"][0], value_id=99, value_name="v99", producer=99)
d["anchor"] = dict(s["ops"][-1]["anchor"])
s["decisions"].append(d)
json.dump(s, open(sys.argv[2], "w"))
PY
xrewrite -s unanchored.json --cpp input.cpp "${FLAGS[@]}" >unanchored.diff 2>unanchored.txt
cmp -s patch.diff unanchored.diff || fail "an unanchored decision changed the patch"
grep -q '^input.cpp:8:3: warning: skipped: sync of v99 (made by aten::t inside libtorch) has no source anchor' unanchored.txt ||
  fail "unanchored decision not reported: $(cat unanchored.txt)"
grep -q ', [1-9][0-9]* skipped$' unanchored.txt || fail "not counted: $(tail -1 unanchored.txt)"

# Two calls of one expression (a helper reached from two places) decided differently: one edit
# changes both calls, so the expression is left alone and reported once; the others still apply.
"$XALLOC_PYTHON" - schedule.json conflict.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = dict(s["decisions"][0], value_id=77, value_name="v77", action="none", reason="too small")
s["decisions"].append(d)
json.dump(s, open(sys.argv[2], "w"))
PY
xrewrite -s conflict.json --cpp input.cpp "${FLAGS[@]}" >conflict.diff 2>conflict.txt
[[ $(grep -c 'k.transpose(0, 1)` is decided sync for one call and none for another' conflict.txt) -eq 1 ]] ||
  fail "a disagreement is not reported once: $(cat conflict.txt)"
grep -q '^+  auto kt = k.transpose(0, 1).contiguous();' conflict.diff &&
  fail "an expression decided two ways was converted"
grep -q '^+  auto second = a.transpose(0, 1).contiguous();' conflict.diff ||
  fail "the other decisions were not applied"

rc=0
xrewrite -s schedule.json --cpp input.cpp --check -q "${FLAGS[@]}" 2>/dev/null || rc=$?
[[ $rc -eq 1 ]] || fail "--check on the original should exit 1, got $rc"

xrewrite -s schedule.json --cpp input.cpp --export-fixes fixes.yaml -q "${FLAGS[@]}" 2>/dev/null
grep -q 'ReplacementText: '"'"'.contiguous()'"'" fixes.yaml || fail "no replacement in fixes.yaml"
if command -v clang-apply-replacements-14 >/dev/null; then
  mkdir fixes && cp input.cpp fixes/ && sed "s#$WORK/input.cpp#$WORK/fixes/input.cpp#g" fixes.yaml >fixes/f.yaml
  clang-apply-replacements-14 fixes || fail "clang-apply-replacements rejected fixes.yaml"
fi

# A conforming YAML reader (PyYAML) reads back exactly the replacements --in-place makes.
cat >apply_yaml.py <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
text = open(sys.argv[2], "rb").read()
for r in sorted(doc["Replacements"], key=lambda r: -r["Offset"]):
    text = text[:r["Offset"]] + r["ReplacementText"].encode() + text[r["Offset"] + r["Length"]:]
sys.stdout.buffer.write(text)
PY
"$XALLOC_PYTHON" apply_yaml.py fixes.yaml input.cpp >yaml-applied.cpp || fail "PyYAML could not apply fixes.yaml"
xrewrite -s schedule.json --cpp input.cpp --in-place -q "${FLAGS[@]}" 2>/dev/null
cmp -s input.cpp yaml-applied.cpp || fail "fixes.yaml read by PyYAML and --in-place disagree"
if [[ -d fixes ]]; then
  cmp -s input.cpp fixes/input.cpp || fail "--export-fixes and --in-place disagree"
fi
xrewrite -s schedule.json --cpp input.cpp -q "${FLAGS[@]}" >second.diff 2>/dev/null
[[ ! -s second.diff ]] || fail "second run is not empty: $(cat second.diff)"
xrewrite -s schedule.json --cpp input.cpp --check -q "${FLAGS[@]}" 2>/dev/null || fail "--check after --in-place"
clang++-14 -fsyntax-only -std=c++17 -Imock input.cpp || fail "the patched source does not compile"

# The fast form: the async decision holds its conversion in a handle and its uses wait on it.
cp "$src/input.cpp" fast.cpp
# `a + b` made async too: it has no `auto v = ...;` to hold a handle, so it is written as sync.
python3 - schedule.json fast-schedule.json <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().replace('"input.cpp"', '"fast.cpp"'))
for d in s["decisions"]:
    if d["anchor"].get("expr") == "a + b":
        d["action"], d["window_id"] = "async", 0
json.dump(s, open(sys.argv[2], "w"))
PY
xrewrite -s fast-schedule.json --cpp fast.cpp --form fast --export-fixes fast.yaml -q "${FLAGS[@]}" 2>/dev/null
"$XALLOC_PYTHON" apply_yaml.py fast.yaml fast.cpp >fast-yaml.cpp || fail "PyYAML could not apply fast.yaml"
xrewrite -s fast-schedule.json --cpp fast.cpp --form fast --in-place -q "${FLAGS[@]}" 2>/dev/null
cmp -s fast.cpp fast-yaml.cpp || fail "fast form: the #include in fast.yaml does not read back as written"
grep -q 'auto scores = xalloc::runtime::contiguousAsync(q.matmul(kt));' fast.cpp ||
  fail "fast form: no async start"
grep -q 'return scores.wait();' fast.cpp || fail "fast form: the use does not wait"
grep -q '^#include "xalloc/runtime/async.h"$' fast.cpp || fail "fast form: no include"
grep -q 'xalloc::runtime::contiguousFast(' fast.cpp || fail "fast form: sync is not contiguousFast"
grep -q 'auto s = xalloc::runtime::contiguousFast(a + b).matmul' fast.cpp ||
  fail "fast form: an async site with no handle to hold is not written as sync"
grep -q '\.contiguous()' "$src/input.cpp" &&
  [[ $(grep -c '\.contiguous()' fast.cpp) -le $(grep -c '\.contiguous()' "$src/input.cpp") ]] ||
  fail "fast form: sync added .contiguous()"
xrewrite -s fast-schedule.json --cpp fast.cpp --form fast --check -q "${FLAGS[@]}" 2>/dev/null ||
  fail "fast form is not idempotent"
xrewrite -s fast-schedule.json --cpp fast.cpp --check -q "${FLAGS[@]}" 2>/dev/null ||
  fail "a fast-form source counts as converted for the portable form too"
clang++-14 -fsyntax-only -std=c++17 -Imock fast.cpp || fail "the fast-form source does not compile"

# A channels-last target: written with libtorch's memory format (in the fast form too: the
# runtime's kernel makes row-major tensors only), read back as done, --check clean, compiles.
cp "$src/input.cpp" cl.cpp
python3 - schedule.json cl-schedule.json <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().replace('"input.cpp"', '"cl.cpp"'))
n = 0
for d in s["decisions"]:
    if d["action"] == "sync" and d["anchor"].get("expr") == "a + b":
        d["target"] = "channels_last"
        n += 1
assert n == 1, n
json.dump(s, open(sys.argv[2], "w"))
PY
xrewrite -s cl-schedule.json --cpp cl.cpp --form fast "${FLAGS[@]}" >cl.diff 2>cl.txt
grep -q '^+.*(a + b).contiguous(at::MemoryFormat::ChannelsLast)' cl.diff ||
  fail "channels-last target not written: $(cat cl.diff)"
grep -q 'converted `a + b` to channels_last' cl.txt || fail "channels-last not reported: $(cat cl.txt)"
xrewrite -s cl-schedule.json --cpp cl.cpp --export-fixes cl.yaml -q "${FLAGS[@]}" 2>/dev/null
grep -q "ReplacementText: *'.contiguous(at::MemoryFormat::ChannelsLast)'" cl.yaml ||
  fail "no channels-last replacement in the fixes: $(cat cl.yaml)"
xrewrite -s cl-schedule.json --cpp cl.cpp --in-place -q "${FLAGS[@]}" 2>/dev/null
xrewrite -s cl-schedule.json --cpp cl.cpp -q "${FLAGS[@]}" >cl2.diff 2>/dev/null
[[ ! -s cl2.diff ]] || fail "a second channels-last run is not empty: $(cat cl2.diff)"
xrewrite -s cl-schedule.json --cpp cl.cpp --check -q "${FLAGS[@]}" 2>/dev/null ||
  fail "--check after the channels-last rewrite"
clang++-14 -fsyntax-only -std=c++17 -Imock cl.cpp || fail "the channels-last source does not compile"
# A row-major decision where the source makes channels-last is not written over.
sed 's/"target": "channels_last"/"target": "contiguous"/' cl-schedule.json >row-schedule.json
xrewrite -s row-schedule.json --cpp cl.cpp -q "${FLAGS[@]}" >row.diff 2>row.txt || true
[[ ! -s row.diff ]] || fail "a row-major decision rewrote a channels-last conversion: $(cat row.diff)"
grep -q 'converted to channels_last here already, not to contiguous' row.txt ||
  fail "the other memory format is not reported: $(cat row.txt)"

# Bad input: a missing source and one Clang cannot parse.
# Edits stay inside the folders xrewrite may patch: the current folder, the sources' own, and
# --root. A header reached through -I elsewhere whose name an anchor matches is skipped, said
# in a warning, and patched only with --root.
mkdir -p bound/proj bound/elsewhere
cat >bound/elsewhere/helper.h <<'H'
#include <torch/torch.h>
inline torch::Tensor helperT(const torch::Tensor& k) {
  auto kt = k.transpose(0, 1);
  return kt.matmul(k);
}
H
printf '#include "helper.h"\ntorch::Tensor run(const torch::Tensor& k) { return helperT(k); }\n' >bound/proj/main.cpp
python3 - schedule.json bound/s.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["decisions"][0]
d["anchor"].update({"file": "helper.h", "function": "helperT", "expr": "k.transpose(0, 1)", "line": 3})
s["decisions"] = [d]
json.dump(s, open(sys.argv[2], "w"))
PY
(cd bound/proj && xrewrite -s ../s.json --cpp main.cpp -- -std=c++17 -I../../mock -I../elsewhere) >bound.diff 2>bound.txt
[[ ! -s bound.diff ]] || fail "a header outside the boundary was patched: $(cat bound.diff)"
grep -q "helper.h: warning: skipped: outside the folders xrewrite patches" bound.txt || fail "no warning: $(cat bound.txt)"
# One decision is one skip, whatever number of edits it makes (the fast form: a call, its closing
# parenthesis and the runtime's #include).
(cd bound/proj && xrewrite -s ../s.json --cpp main.cpp --form fast -- -std=c++17 -I../../mock -I../elsewhere) 2>bound-fast.txt >/dev/null
grep -q '^xrewrite: 0 applied, 0 already applied, 0 not found, 1 skipped$' bound-fast.txt || fail "not counted once: $(cat bound-fast.txt)"
(cd bound/proj && xrewrite -s ../s.json --cpp main.cpp --in-place -q -- -std=c++17 -I../../mock -I../elsewhere) 2>/dev/null
grep -q 'auto kt = k.transpose(0, 1);' bound/elsewhere/helper.h || fail "--in-place patched a header outside the boundary"
(cd bound/proj && xrewrite -s ../s.json --cpp main.cpp --root ../elsewhere -q -- -std=c++17 -I../../mock -I../elsewhere) >bound-root.diff
grep -q '^+  auto kt = k.transpose(0, 1).contiguous();' bound-root.diff || fail "--root did not let the header be patched: $(cat bound-root.diff)"
expect_error 2 'nowhere: error: --root: not a folder' -- xrewrite -s bound/s.json --cpp bound/proj/main.cpp --root nowhere -- -std=c++17 -Imock -Ibound/elsewhere

# A header reached through a symbolic link (include/helper.h -> ../impl/helper_impl.h), its
# anchor written relative to the project (as `xprof run` writes it) and xrewrite run from
# another folder (src/): the link's target is patched, --check says a change is needed, and a
# second run has nothing to do. A decision for a file no given file reaches is said and counted.
mkdir -p sym/include sym/impl sym/src
sed 's/helperT/linkedT/' bound/elsewhere/helper.h >sym/impl/helper_impl.h
ln -s ../impl/helper_impl.h sym/include/helper.h
printf '#include "helper.h"\ntorch::Tensor run(const torch::Tensor& k) { return linkedT(k); }\n' >sym/src/main.cpp
python3 - bound/s.json sym/s.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["decisions"][0]
d["anchor"].update({"file": "include/helper.h", "function": "linkedT"})
other = json.loads(json.dumps(d))
other["anchor"].update({"file": "src/other.cpp", "function": "other"})
other["value_id"] += 1000
s["decisions"] = [d, other]
json.dump(s, open(sys.argv[2], "w"))
PY
SYMFLAGS=(-- -std=c++17 "-I$WORK/mock" -I../include)
rc=0
(cd sym/src && xrewrite -s ../s.json --cpp main.cpp --root .. --check "${SYMFLAGS[@]}") 2>sym-check.txt || rc=$?
[[ $rc -eq 1 ]] || fail "--check through a symlinked header should exit 1, got $rc: $(cat sym-check.txt)"
grep -q '^src/other.cpp: note: 1 decision not applied: no file given is this one or includes it' sym-check.txt ||
  fail "a decision for a file not parsed is not said: $(cat sym-check.txt)"
grep -q ', 1 in files not parsed$' sym-check.txt || fail "not counted: $(tail -1 sym-check.txt)"
(cd sym/src && xrewrite -s ../s.json --cpp main.cpp --root .. --in-place -q "${SYMFLAGS[@]}")
grep -q 'auto kt = k.transpose(0, 1).contiguous();' sym/impl/helper_impl.h ||
  fail "the symlinked header's target was not patched: $(cat sym/impl/helper_impl.h)"
[[ -L sym/include/helper.h ]] || fail "the link was replaced"
(cd sym/src && xrewrite -s ../s.json --cpp main.cpp --root .. -q "${SYMFLAGS[@]}") >sym-again.diff
[[ ! -s sym-again.diff ]] || fail "a second run through the link changes more: $(cat sym-again.diff)"

# Outputs that cannot be written, or would clobber a source, are refused before Clang runs;
# -o belongs to the TorchScript path.
cp input.cpp keep.cpp
expect_error 2 '^mock: error: is a directory' -- xrewrite -s schedule.json --cpp input.cpp --export-fixes mock "${FLAGS[@]}"
expect_error 2 '^/nonexistent/f\.yaml: error: cannot write: folder' -- \
  xrewrite -s schedule.json --cpp input.cpp --export-fixes /nonexistent/f.yaml "${FLAGS[@]}"
expect_error 2 '^\./input\.cpp: error: --export-fixes names a source to patch' -- \
  xrewrite -s schedule.json --cpp input.cpp --export-fixes ./input.cpp "${FLAGS[@]}"
expect_error 2 '^out\.pt: error: -o writes a TorchScript model' -- xrewrite -s schedule.json --cpp input.cpp -o out.pt "${FLAGS[@]}"
cmp -s input.cpp keep.cpp || fail "a refused run touched the source"
expect_error 2 '^nothere\.cpp: error: cannot read file' -- xrewrite -s schedule.json --cpp nothere.cpp "${FLAGS[@]}"
echo 'int main( {' >broken.cpp
expect_error 2 '^broken\.cpp: error: cannot parse: .*broken\.cpp:1:' -- xrewrite -s schedule.json --cpp broken.cpp "${FLAGS[@]}"

# No compilation database where -p points, and a schedule made for other sources; neither
# touches the file.
cp input.cpp untouched.cpp
expect_error 2 '^nobuild: error: no compilation database' -- xrewrite -s schedule.json -p nobuild --cpp input.cpp --in-place
sed 's#"input.cpp"#"elsewhere/model.cpp"#' schedule.json >other-schedule.json
expect_error 2 '^other-schedule\.json: error: the schedule is for other sources: it names elsewhere/model\.cpp, none of which' -- \
  xrewrite -s other-schedule.json --cpp input.cpp --in-place "${FLAGS[@]}"
cmp -s input.cpp untouched.cpp || fail "a failed run touched the source"

# Real libtorch headers: the wheel's, as a user's build passes them.
TORCH=(-- "${TORCH_CXXFLAGS[@]}")
xrewrite -s real-schedule.json --cpp real.cpp --in-place -q "${TORCH[@]}" 2>real.err ||
  fail "real headers: $(cat real.err)"
grep -q 'auto xt = x.transpose(0, 1).contiguous();' real.cpp || fail "real headers: not patched"
g++ -fsyntax-only "${TORCH_CXXFLAGS[@]}" real.cpp ||
  fail "real headers: the patched program does not compile"
# A value the program writes where the profiler cannot see (accessor, data_ptr, in place, out=,
# a non-const reference, an assignment to a view, a helper of its own; or the tensor it is a
# view of written so) is never converted: the write would land in the copy (an accessor write of
# 1000 read back as -1.08 after such a patch). The clean function's view is converted.
cp "$src/writes.cpp" .
"$XALLOC_PYTHON" - real-schedule.json writes.cpp writes-schedule.json <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
template = s["decisions"][0]
s["decisions"] = []
fn = None
for n, line in enumerate(text, 1):
    m = re.match(r"^\S.* (\w+)\(.*\) \{$", line)
    if m:
        fn = m.group(1)
    m = re.match(r"^  auto v = (.*);$", line)
    if m:
        d = json.loads(json.dumps(template))
        d["anchor"].update(file="writes.cpp", function=fn, expr=m.group(1), line=n, col=12)
        s["decisions"].append(d)
json.dump(s, open(sys.argv[3], "w"))
PY
xrewrite -s writes-schedule.json --cpp writes.cpp "${TORCH[@]}" >writes.diff 2>writes.err ||
  fail "writes: $(cat writes.err)"
for why in 'is written through accessor\(\)' 'is written through data_ptr\(\)' \
  'is written in place by index_put_\(\)' 'is written in place by copy_\(\)' \
  'is passed to add_out\(\) as a non-const at::Tensor&' 'is passed to fill\(\) as a non-const' \
  'is passed to poke\(\) at line [0-9]+, where `t` is written through data_ptr' \
  'is written by an assignment to a view of it'; do
  grep -Eq "writes\.cpp:[0-9]+:12: warning: skipped: .*$why" writes.err ||
    fail "writes: no warning matching /$why/: $(cat writes.err)"
done
[[ $(grep -c 'warning: skipped:' writes.err) -eq 9 ]] || fail "writes: expected 9 skips: $(cat writes.err)"
[[ $(grep -c '^+.*contiguous()' writes.diff) -eq 1 ]] &&
  grep -q '^+  auto v = x.transpose(0, 1).contiguous();' writes.diff &&
  grep -q '^+  auto v = x.transpose(0, 1).contiguous();' <(sed -n '/clean/,$p' writes.diff) ||
  fail "writes: only the clean function's view should be converted: $(cat writes.diff)"

# The preamble's PCH (its leading system includes compiled once per compile command): cached in
# XALLOC_PCH_DIR by the second parse (the first marks it seen), loaded by the next with the same
# patch; a header changed
# since is refused by Clang, the parse without it decides (the same patch) and the PCH is built
# again; XALLOC_PCH=0 parses without one. (A fresh copy: input.cpp was patched in place above.)
mkdir pchcase && cp -r "$src/input.cpp" "$src/mock" pchcase/
pchdir="$WORK/pch"
pch_patch() { (cd pchcase && xrewrite -s ../schedule.json --cpp input.cpp -q "${FLAGS[@]}" 2>"../$1.txt") >"$1.diff"; }
XALLOC_PCH_DIR="$pchdir" pch_patch pch0 || fail "pch: $(cat pch0.txt)"
compgen -G "$pchdir/*.pch" >/dev/null && fail "pch: a preamble seen once was built already"
XALLOC_PCH_DIR="$pchdir" pch_patch pch1 || fail "pch: $(cat pch1.txt)"
compgen -G "$pchdir/*.pch" >/dev/null || fail "pch: the second parse cached no PCH in $pchdir"
XALLOC_PCH_DIR="$pchdir" pch_patch pch2 || fail "pch: $(cat pch2.txt)"
cmp -s patch.diff pch0.diff && cmp -s patch.diff pch1.diff && cmp -s patch.diff pch2.diff ||
  fail "pch: the patch differs with a PCH"
echo "// a line added to the header after the PCH was built" >>pchcase/mock/torch/torch.h
XALLOC_PCH_DIR="$pchdir" pch_patch pch3 || fail "pch: a changed header broke the parse: $(cat pch3.txt)"
cmp -s patch.diff pch3.diff || fail "pch: the patch differs after the header changed"
XALLOC_PCH_DIR="$pchdir" pch_patch pch4 || fail "pch: $(cat pch4.txt)"
cmp -s patch.diff pch4.diff || fail "pch: the rebuilt PCH gives another patch"
XALLOC_PCH=0 XALLOC_PCH_DIR="$WORK/nopch" pch_patch pch5 || fail "pch: $(cat pch5.txt)"
cmp -s patch.diff pch5.diff && [[ ! -e "$WORK/nopch" ]] || fail "pch: XALLOC_PCH=0 still cached one"
XALLOC_PCH=yes expect_error 2 "^XALLOC_PCH: error: 'yes': expected 0" -- xrewrite -s schedule.json --cpp input.cpp "${FLAGS[@]}"
XALLOC_PCH_CACHE_MB=1G expect_error 2 "^XALLOC_PCH_CACHE_MB: error: '1G': expected a whole number" -- xrewrite -s schedule.json --cpp input.cpp "${FLAGS[@]}"

# A function template's sites: the debug information names an instantiation (the demangler's
# "at::Tensor (anonymous namespace)::mix<double>", its return type and arguments included) and
# puts the statement's column on the line, not the call's; Clang walks the template's pattern.
# Both instantiations' decisions land on the one site in the source (the second "same site").
cat >tmpl.cpp <<'CPP'
#include <torch/torch.h>

namespace {

template <class Scale> torch::Tensor mix(const torch::Tensor& x, const torch::Tensor& w) {
  auto channels = x.transpose(0, 1);
  return channels.matmul(w);
}

} // namespace

torch::Tensor run(const torch::Tensor& x, const torch::Tensor& w) {
  return mix<float>(x, w) + mix<double>(x, w);
}
CPP
"$XALLOC_PYTHON" - schedule.json tmpl.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["decisions"][0]
d["action"], d["target"] = "sync", "contiguous"
s["decisions"] = []
for name in ("at::Tensor (anonymous namespace)::mix<float>", "at::Tensor (anonymous namespace)::mix<double>"):
    s["decisions"].append(dict(d, anchor={"file": "tmpl.cpp", "function": name, "expr": "",
                                          "op": "aten::transpose", "ordinal": 0, "line": 6, "col": 8}))
json.dump(s, open(sys.argv[2], "w"))
PY
xrewrite -s tmpl.json --cpp tmpl.cpp "${FLAGS[@]}" >tmpl.diff 2>tmpl.txt ||
  fail "template: xrewrite failed: $(cat tmpl.txt)"
grep -q '^+  auto channels = x.transpose(0, 1).contiguous();$' tmpl.diff ||
  fail "template: the site in mix<float>/mix<double> was not converted: $(cat tmpl.txt)"
grep -q 'xrewrite: 1 applied, 1 already applied, 0 not found' tmpl.txt || fail "template: $(cat tmpl.txt)"

echo "cli.cpp: ok"
