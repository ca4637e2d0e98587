#!/usr/bin/python3
"""The original model, the TorchScript peer, ONNX Runtime and ours, timed where users run them:
in a Python process that loaded them as users do (torch.jit.load, glibc's malloc), one thread.

Usage: /usr/bin/python3 bench/python_peers.py --original M.pt --ours M.opt.pt [--onnx M.onnx]
           [--shape 1x3x224x224] [--rounds 30] [--threads 1] [--json OUT.json]

The input is the example input the model stores (xalloc/example_inputs.json: shape, dtype and
range), or a float32 tensor of --shape; one input (ONNX Runtime is given float32 only).

The peer is torch.jit.optimize_for_inference(torch.jit.freeze(original)); ONNX Runtime (npm's
onnxruntime-node, CPU provider, all graph optimizations, one intra-op thread) runs in a Node.js
child (bench/ort/serve.js) that times its own runs. Each round runs every contender once, in an
order that turns from round to round. For each: the median and p90 in ms, the speed-up over the
original (median of per-round ratios), and the largest error against the original's output,
element by element as xrewrite measures it (|y - x| / max(|x|, floor), the floor the 10th
percentile of |x| over the non-zero elements that differ); above 1e-4, the default tolerance,
a contender is marked WRONG.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--original", required=True)
    p.add_argument("--ours", required=True)
    p.add_argument("--onnx")
    p.add_argument("--shape", help="the input's shape, e.g. 1x3x224x224 (default: the model's)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json")
    a = p.parse_args()
    if a.shape:
        try:
            a.shape = [int(d) for d in a.shape.split("x")]
        except ValueError:
            p.error(f"--shape {a.shape!r}: expected sizes such as 1x3x224x224")
    if a.rounds < 10:
        p.error("--rounds must be at least 10")
    return a


args = parse()
# One thread for libtorch and OpenBLAS together, before either is loaded.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
import torch  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
import xalloc  # noqa: E402


def leaves(v):
    """The tensors of an output, in order (tuples, lists and dicts of them too)."""
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for e in v for t in leaves(e)]
    if isinstance(v, dict):
        return [t for e in v.values() for t in leaves(e)]
    return []


def output_error(ref, y):
    """The largest element_error over an output's tensors (ONNX Runtime's one output against
    the original's first)."""
    a, b = leaves(ref), leaves(y)
    if len(b) == 1 and len(a) > 1:
        a = a[:1]
    if len(a) != len(b) or not a:
        return float("inf")
    return max(element_error(p, q) for p, q in zip(a, b))


def element_error(ref, y):
    """xrewrite's measure (tspass::maxRelativeError) for one tensor."""
    if not ref.is_floating_point():
        return 0.0 if torch.equal(ref, y) else float("inf")
    ref, y = ref.double().flatten(), y.double().flatten()
    if ref.shape != y.shape:
        return float("inf")
    same = (ref.isnan() & y.isnan()) | (ref.isinf() & (ref == y))
    ref, y = torch.where(same, 0.0, ref), torch.where(same, 0.0, y)
    diff = (y - ref).abs()
    if not torch.isfinite(diff).all():
        return float("inf")
    if diff.max() == 0:
        return 0.0
    mag = ref.abs()
    changed = mag[(diff > 0) & (mag > 0)]
    if changed.numel() == 0:
        return float("inf")
    floor = changed.kthvalue(max(1, changed.numel() // 10)).values
    return (diff / mag.clamp_min(floor)).max().item()


class OrtPeer:
    """ONNX Runtime in a Node.js child, one JSON line per command."""

    def __init__(self, onnx, x, threads, work):
        serve = os.path.join(HERE, "ort", "serve.js")
        self.proc = subprocess.Popen(["node", serve], cwd=os.path.join(HERE, "ort"),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.work = work
        self.ask({"load": os.path.abspath(onnx), "threads": threads})
        path = os.path.join(work, "x.bin")
        x.contiguous().numpy().astype("float32").tofile(path)
        self.ask({"input": path, "shape": list(x.shape)})

    def ask(self, cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if not reply.get("ok"):
            raise SystemExit(f"python_peers.py: error: onnxruntime: {reply.get('error')}")
        return reply

    def run(self):
        return self.ask({"run": 1})["ms"][0]

    def output(self):
        path = os.path.join(self.work, "y.bin")
        shape = self.ask({"save": path})["shape"]
        import numpy
        return torch.from_numpy(numpy.fromfile(path, dtype="float32").reshape(shape))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def example_input():
    """The model's stored example input (as xprof makes it), or float32 noise of --shape."""
    torch.manual_seed(0)
    if args.shape:
        return torch.randn(args.shape)
    import zipfile
    with zipfile.ZipFile(args.original) as z:
        names = [n for n in z.namelist() if n.endswith("extra/xalloc/example_inputs.json")]
        if not names:
            raise SystemExit(f"python_peers.py: error: {args.original} stores no example inputs; "
                             "give --shape")
        spec = json.loads(z.read(names[0]))["inputs"][0]
    dtype = getattr(torch, {"float32": "float32", "int64": "int64"}.get(spec.get("dtype", "float32"),
                                                                        "float32"))
    if dtype == torch.int64:
        return torch.randint(int(spec.get("low", 0)), int(spec.get("high", 100)), spec["shape"])
    return torch.randn(spec["shape"])


def main():
    torch.set_num_threads(args.threads)
    x = example_input()
    original = torch.jit.load(args.original).eval()
    peer = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.load(args.original).eval()))
    ours = xalloc.load(args.ours)
    import time

    def timed(m):
        def run():
            t0 = time.perf_counter()
            m(x)
            return (time.perf_counter() - t0) * 1e3
        return run

    with tempfile.TemporaryDirectory() as work, torch.no_grad():
        contenders = [("original", timed(original)), ("peer", timed(peer))]
        ort = None
        if args.onnx:
            ort = OrtPeer(args.onnx, x, args.threads, work)
            contenders.append(("onnxruntime", ort.run))
        contenders.append(("ours", timed(ours)))
        ref = original(x)
        outputs = {"original": ref, "peer": peer(x), "ours": ours(x)}
        for _ in range(args.warmup):
            for _, run in contenders:
                run()
        if ort:
            outputs["onnxruntime"] = ort.output()
        times = {name: [] for name, _ in contenders}
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for name, run in order:
                times[name].append(run())
        if ort:
            ort.close()
    rows = []
    for name, _ in contenders:
        ts = sorted(times[name])
        ratios = sorted(o / t for o, t in zip(times["original"], times[name]))
        err = output_error(ref, outputs[name])
        rows.append({"name": name, "median_ms": ts[len(ts) // 2],
                     "p90_ms": ts[min(len(ts) - 1, (9 * len(ts)) // 10)],
                     "vs_original": ratios[len(ratios) // 2], "max_error": err,
                     "wrong": not err <= 1e-4})
    model = os.path.basename(args.original).removesuffix(".pt")
    print(f"{model}: {args.rounds} rounds, {args.threads} thread(s), in Python")
    print(f"  {'contender':<12} {'median ms':>9} {'p90 ms':>8} {'vs original':>11} {'max error':>10}")
    for r in rows:
        print(f"  {r['name']:<12} {r['median_ms']:>9.3f} {r['p90_ms']:>8.3f} {r['vs_original']:>10.2f}x "
              f"{r['max_error']:>10.1e}{'  WRONG' if r['wrong'] else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.original, "threads": args.threads, "rounds": args.rounds,
                       "contenders": rows}, f, indent=1, sort_keys=True)


main()
