#!/usr/bin/env python3
"""Ours against ONNX Runtime op by op, on one model (what #37 asks before a kernel is changed).

    /usr/bin/python3 bench/op_profile.py MODEL.onnx OURS.pt [--shape 1x3x224x224] [--runs 100]
                                         [--threads 1]

ONNX Runtime's own profiler (its Python package, the session options as in the benchmark)
gives its time per node; oneDNN's verbose mode (DNNL_VERBOSE=1) gives the time of each primitive
ours runs, in a process of its own that loads OURS.pt with xalloc.load. Printed: ONNX Runtime's
time per op type, ours per oneDNN primitive kind, and each convolution side by side (matched in
order by its channels (ONNX Runtime pads them to blocks), input size, kernel, stride and
groups), in microseconds a call. Time spent
outside oneDNN in ours (ATen ops, the interpreter) is the rest of a call: compare the totals with
the model's latency in `make bench-peer`. Run on one core: `taskset -c 1`; at --threads N both
run N intra-op threads (ours plans made at N: `THREADS=N`).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 10  # warm-up calls left out of both profiles


def die(message):
    print(f"op_profile.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def ort_profile(onnx, shape, runs, work, threads):
    # ONNX Runtime's Python package, with the benchmark's session options and its profiler on.
    import numpy
    import onnxruntime
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(work, "ort")
    try:
        session = onnxruntime.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
        feeds = {session.get_inputs()[0].name: numpy.random.rand(*shape).astype("float32")}
        for _ in range(runs + SKIP):
            session.run(None, feeds)
        events = json.load(open(session.end_profiling()))
    except Exception as e:  # the package's own failure, in one line
        die(f"ONNX Runtime: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    calls = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    start = calls[SKIP]["ts"]
    n = len(calls) - SKIP
    by_type, convs = collections.Counter(), collections.OrderedDict()
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or e["ts"] < start:
            continue
        a = e["args"]
        by_type[a["op_name"]] += e["dur"] / n
        if a["op_name"] in ("Conv", "FusedConv"):
            shapes = [list(s.values())[0] for s in a["input_type_shape"]]
            out = list(a["output_type_shape"][0].values())[0]
            x, w = shapes[0], shapes[1]
            key = (x[1], w[0], x[2], w[2], x[2] // max(out[2], 1), x[1] // max(w[1], 1))
            convs.setdefault(e["name"], [key, 0.0])[1] += e["dur"] / n
    return by_type, list(convs.values())


CHILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import xalloc
torch.set_num_threads(int(sys.argv[5]))
m = xalloc.load(sys.argv[2])
x = torch.rand(*[int(v) for v in sys.argv[3].split('x')])
with torch.no_grad():
    for _ in range(%d): m(x)
    print('XALLOC_MARK', flush=True)
    for _ in range(int(sys.argv[4])): m(x)
""" % SKIP


def ours_profile(ours, shape, runs, threads):
    env = dict(os.environ, DNNL_VERBOSE="1", OPENBLAS_NUM_THREADS=str(threads))
    py = os.path.join(os.path.dirname(HERE), "build", "python")
    r = subprocess.run([sys.executable, "-c", CHILD, py, ours, "x".join(map(str, shape)),
                        str(runs), str(threads)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        die(f"ours: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    lines = r.stdout.split("XALLOC_MARK", 1)[-1].splitlines()
    execs = [l.split(",") for l in lines if l.startswith("onednn_verbose,exec")]
    per_call = len(execs) // runs
    by_kind, convs, index = collections.Counter(), [], {}
    for i, f in enumerate(execs[:per_call * runs]):
        us = float(f[-1]) * 1e3 / runs
        by_kind[f"{f[3]} ({f[4]})"] += us
        if f[3] != "convolution":
            continue
        j = i % per_call  # the same primitive in every call
        if j not in index:
            d = {k: int(v) for k, v in re.findall(r"([a-z]+)(\d+)", f[-2])}
            index[j] = len(convs)
            convs.append([(d["ic"], d["oc"], d["ih"], d["kh"], d["sh"], d.get("g", 1)), 0.0])
        convs[index[j]][1] += us
    return by_kind, convs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx")
    p.add_argument("ours")
    p.add_argument("--shape", default="1x3x224x224")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.threads < 1:
        die(f"--threads {a.threads}: want a count of 1 or more")
    for f in (a.onnx, a.ours):
        if not os.path.isfile(f):
            die(f"{f}: no such file")
    try:
        shape = [int(v) for v in a.shape.split("x")]
    except ValueError:
        die(f"--shape {a.shape}: want sizes like 1x3x224x224")
    with tempfile.TemporaryDirectory() as work:
        ort_types, ort_convs = ort_profile(a.onnx, shape, a.runs, work, a.threads)
    ours_kinds, ours_convs = ours_profile(a.ours, shape, a.runs, a.threads)
    print(f"ONNX Runtime, per op type (us a call; total {sum(ort_types.values()):.0f}):")
    for k, v in ort_types.most_common():
        print(f"  {k:<24} {v:9.1f}")
    print(f"ours in oneDNN, per primitive (us a call; total {sum(ours_kinds.values()):.0f}):")
    for k, v in ours_kinds.most_common():
        print(f"  {k:<48} {v:9.1f}")
    print("convolutions (in, out, size, kernel, stride, groups): ONNX Runtime / ours, us")
    left = list(ort_convs)

    def padded(theirs, ours):  # ONNX Runtime's NCHWc convolutions report channels padded to 8/16
        return theirs in (ours, -(-ours // 8) * 8, -(-ours // 16) * 16)

    def same(t, o):
        return (padded(t[0], o[0]) and padded(t[1], o[1]) and t[2:5] == o[2:5] and
                (t[5] == o[5] or (o[5] > 1 and t[5] >= o[5])))

    for key, us in ours_convs:
        match = next((c for c in left if same(c[0], key)), None)
        if match:
            left.remove(match)
        theirs = f"{match[1]:8.1f}" if match else "       –"
        print(f"  {str(key):<32} {theirs} {us:8.1f}")
    for key, us in left:
        print(f"  {str(key):<32} {us:8.1f}        –")


if __name__ == "__main__":
    main()
