#!/usr/bin/env python3
"""The original model, the TorchScript peer, ONNX Runtime and ours, timed where users run them:
in a Python process that loaded them as users do (torch.jit.load, glibc's malloc), one thread.

Usage: python bench/python_peers.py --original M.pt --ours M.opt.pt [--onnx M.onnx]
           [--shape 1x3x224x224] [--rounds 30] [--threads 1] [--json OUT.json]
           [--processes 5 [--min-seconds 2]]

--processes N: each contender alone in N fresh processes instead (a process per contender and
try, the contenders' turns rotating, all on one core), as a server starts: it loads its one
model, warms up, and times at least --rounds calls and --min-seconds seconds. For each contender: the median over processes of each one's p50, the
lowest and highest p50 (steady when within 10% of each other), the median p90, and the
process's resident memory after its runs and at its peak (ONNX Runtime: its Node.js process).
Errors are measured from each process's output against the original's.

The input is the example input the model stores (xalloc/example_inputs.json: shape, dtype and
range), or a float32 tensor of --shape; one input (ONNX Runtime is given float32 only).

The peer is torch.jit.optimize_for_inference(torch.jit.freeze(original)); with --eager (the eager
module, torch.save'd), torch.compile with Inductor's freezing too ("compile", its compile time
reported apart; in fresh processes only); ONNX Runtime is its Python package (CPU provider, all
graph optimizations, as many intra-op threads, one inter-op). Each round runs every contender
once, in an order that turns from round to round, all on one core at one thread. For each: the median and p90 in ms, the speed-up over the
original (median of per-round ratios), and the largest error against the original's output,
element by element as xrewrite measures it (|y - x| / max(|x|, floor), the floor the 10th
percentile of |x| over the non-zero elements that differ); above 1e-4, the default tolerance,
a contender is marked WRONG.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--original", required=True)
    p.add_argument("--ours", required=True)
    p.add_argument("--onnx")
    p.add_argument("--eager", help="the eager module (torch.save of it): adds torch.compile "
                                   "with Inductor's freezing as a contender (--processes only)")
    p.add_argument("--shape", help="the input's shape, e.g. 1x3x224x224 (default: the model's)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--list", action="store_true",
                   help="call the model with a list of the one input, as a detection model "
                        "takes its images (torchvision's ops loaded)")
    p.add_argument("--processes", type=int, default=0,
                   help="time each contender alone in this many fresh processes")
    # 2 s: with 1 s, one of five fresh processes of EfficientNet-B0 read 6.34 ms against the
    # others' 5.73-6.01 (session 27); this machine's slow phases last about a second.
    p.add_argument("--min-seconds", type=float, default=2.0,
                   help="in a fresh process, time calls for at least this long (and at least "
                        "--rounds calls)")
    # Turns (session 27): one after another, a slow phase of this shared machine fell inside one
    # process's window and read as that process's spread (ConvNeXt-T 13.7%, every contender slow
    # in that round); in turns of 0.2 s, five processes spread 1.0-1.6% where the original still
    # shows glibc's bimodality (EfficientNet-B0: 14.3 ms in one process, 20.5 in the others).
    p.add_argument("--turns", type=float, default=0.2, metavar="SECONDS",
                   help="with --processes: keep every contender's processes alive together and "
                        "time them in turns of this many seconds, so that every process samples "
                        "the machine's slow and fast phases alike (0: one after another)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # one contender, in a process of its own
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # --turns' children
    p.add_argument("--child-output", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.shape:
        try:
            a.shape = [int(d) for d in a.shape.split("x")]
        except ValueError:
            p.error(f"--shape {a.shape!r}: expected sizes such as 1x3x224x224")
    if a.rounds < 10:
        p.error("--rounds must be at least 10")
    if a.processes and a.processes < 2:
        p.error("--processes must be at least 2")
    return a


args = parse()
# One thread for libtorch and OpenBLAS together, before either is loaded.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
import torch  # noqa: E402
if args.list:
    import torchvision  # noqa: E402,F401  (its ops: a detection model calls torchvision::nms)

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
    if args.list:
        # A detector's detections: its own top-k and NMS reorder nearly equal scores under one
        # ulp of its input, so they are compared blind to order (xrewrite's maxSortedError).
        def flat(t):
            t = t.flatten()
            return t.sort().values if t.dtype != torch.bool else t.to(torch.uint8).sort().values
        return max(element_error(flat(p), flat(q)) if p.shape == q.shape else float("inf")
                   for p, q in zip(a, b))
    return max(element_error(p, q) for p, q in zip(a, b))


def wrong_above():
    """Beyond this error a contender is marked WRONG: the default tolerance; for a detector's
    detections compared blind to order, 1e-2 (the original's own move by ~5e-4 under one ulp of
    its input or under freezing: top-k and NMS)."""
    return 1e-2 if args.list else 1e-4


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
    """ONNX Runtime's Python package in this process: the CPU provider, all graph optimizations,
    `threads` intra-op threads and one inter-op thread, as BENCHMARKING.md sets it."""

    def __init__(self, onnx, x, threads, work):
        import onnxruntime
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
        self.feed = {self.session.get_inputs()[0].name: x.contiguous().numpy().astype("float32")}
        self.pid = "self"

    def run(self):
        import time
        t0 = time.perf_counter()
        self.session.run(None, self.feed)
        return (time.perf_counter() - t0) * 1e3

    def output(self):
        return torch.from_numpy(self.session.run(None, self.feed)[0])

    def close(self):
        pass


def compiled(eager_path, arg):
    """torch.compile with Inductor's freezing (weights as constants, prepacked for oneDNN), on
    the eager module `eager_path` holds (torch.save of the module): returns the compiled module
    and the seconds its first call took (the compilation, reported apart)."""
    import time
    import torch._inductor.config as inductor_config
    inductor_config.freezing = True
    m = torch.compile(torch.load(eager_path, weights_only=False).eval())
    t0 = time.perf_counter()
    m(arg)
    return m, time.perf_counter() - t0


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
    if "low" in spec and "high" in spec:  # an image's range, as the model's example says
        return torch.rand(spec["shape"]) * (spec["high"] - spec["low"]) + spec["low"]
    return torch.randn(spec["shape"])


def memory_mib(pid="self"):
    """Resident memory now and at its peak (VmRSS, VmHWM), MiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def child():
    """One contender alone in this process: load, warm up, time, report one JSON line."""
    torch.set_num_threads(args.threads)
    x = example_input()
    arg = [x] if args.list else x
    import time
    name = args.child
    with tempfile.TemporaryDirectory() as work, torch.no_grad():
        if name == "onnxruntime":
            ort = OrtPeer(args.onnx, x, args.threads, work)
            run, pid = ort.run, ort.pid
        else:
            compile_s = None
            if name == "compile":
                m, compile_s = compiled(args.eager, arg)
            elif name == "original":
                m = torch.jit.load(args.original).eval()
            elif name == "peer":
                m = torch.jit.optimize_for_inference(
                    torch.jit.freeze(torch.jit.load(args.original).eval()))
            else:
                m = xalloc.load(args.ours)
            pid = "self"

            def run():
                t0 = time.perf_counter()
                m(arg)
                return (time.perf_counter() - t0) * 1e3
        for _ in range(args.warmup):
            run()
        if args.serve:
            # --turns: time a turn when asked ({"time": s} -> {"ms": [...]}), until {"finish"}.
            print(json.dumps({"ready": True}), flush=True)
            for line in sys.stdin:
                cmd = json.loads(line)
                if "finish" in cmd:
                    break
                ms, start = [run()], time.perf_counter()
                while time.perf_counter() - start < cmd["time"]:
                    ms.append(run())
                print(json.dumps({"ms": ms}), flush=True)
            rss, peak = memory_mib(pid)
            y = ort.output() if name == "onnxruntime" else m(arg)
            torch.save(leaves(y), args.child_output)
            if name == "onnxruntime":
                ort.close()
            extra = {"compile_s": compile_s} if name == "compile" else {}
            print(json.dumps({"rss_mib": rss, "peak_mib": peak, **extra}), flush=True)
            return
        # At least --rounds calls and --min-seconds: 30 calls of a 2 ms model are 60 ms, where
        # one burst of another process on this machine moved a process's median by 20-30%.
        ts, start = [], time.perf_counter()
        while len(ts) < args.rounds or (time.perf_counter() - start < args.min_seconds
                                        and len(ts) < 20000):
            ts.append(run())
        ts.sort()
        rss, peak = memory_mib(pid)
        y = ort.output() if name == "onnxruntime" else m(arg)
        torch.save(leaves(y), args.child_output)
        if name == "onnxruntime":
            ort.close()
    print(json.dumps({"p50": ts[len(ts) // 2], "p90": ts[min(len(ts) - 1, (9 * len(ts)) // 10)],
                      "calls": len(ts), "rss_mib": rss, "peak_mib": peak}))


def why(stderr):
    """The line of a child's stderr that says why it failed: its exception (torch.compile ends
    with advice after it), else the last line."""
    lines = stderr.strip().splitlines() or ["?"]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Unsupported|Failure)\b", line):
            return line
    return lines[-1]


def in_turns(names, base, work, failed):
    """--turns: every contender in `names` in --processes fresh processes, all alive together,
    each timed in turns of --turns seconds, the order of all of them rotating, until each has at
    least --rounds calls and --min-seconds of timing: a slow phase of the machine falls on every
    contender alike. Returns each contender's processes' summaries and output files; a
    torch.compile that fails is left out, with why in `failed`."""
    procs = []  # (name, process, output file)
    try:
        for k in range(args.processes):  # contenders interleaved: orig, peer, ..., orig, ...
            for n in names:
                out = os.path.join(work, f"{n}.{k}.pt")
                err = open(os.path.join(work, f"{n}.{k}.err"), "w+")  # never a full pipe
                p = subprocess.Popen(base + ["--child", n, "--child-output", out, "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     text=True)
                p.err = err
                procs.append((n, p, out))

        def reply(name, p):
            line = p.stdout.readline()
            if not line:
                p.wait()
                p.err.seek(0)
                raise SystemExit(f"python_peers.py: error: {name} in a fresh process: "
                                 f"{why(p.err.read())}")
            return json.loads(line)

        def ask(name, p, cmd):
            p.stdin.write(json.dumps(cmd) + "\n")
            p.stdin.flush()
            return reply(name, p)
        for n, p, out in list(procs):
            try:
                reply(n, p)  # loaded and warmed up
            except SystemExit as e:
                if n != "compile":
                    raise
                # torch.compile that fails on a model (a graph it cannot trace, a compiler
                # error) is reported as such; the other contenders are still timed.
                if n not in failed:
                    failed[n] = str(e).split(": ", 3)[-1]
                    print(f"python_peers.py: torch.compile failed in a fresh process: "
                          f"{failed[n]}", file=sys.stderr)
        for n, p, out in [x for x in procs if x[0] in failed]:
            if p.poll() is None:
                p.kill()
            p.wait()
        procs[:] = [x for x in procs if x[0] not in failed]
        ts = [[] for _ in procs]
        timed = [0.0] * len(procs)
        turn = 0
        # Contender by contender, one's slow phase (seconds long on this shared machine) read as
        # that contender's: MobileNetV3-Small at two threads, ours over ONNX Runtime 0.74 in one
        # run and 1.17 in the next (session 40). The rotation interleaves the contenders.
        while any(len(t) < args.rounds or s < args.min_seconds for t, s in zip(ts, timed)):
            order = list(range(len(procs)))
            order = order[turn % len(order):] + order[:turn % len(order)]
            for k in order:
                name, p, _ = procs[k]
                ms = ask(name, p, {"time": args.turns})["ms"]
                ts[k] += ms
                timed[k] += sum(ms) / 1e3
            turn += 1
        runs = {n: [] for n in names if n not in failed}
        outputs = {n: [] for n in names if n not in failed}
        for (n, p, out), t in zip(procs, ts):
            mem = ask(n, p, {"finish": True})
            t.sort()
            runs[n].append({"p50": t[len(t) // 2], "p90": t[min(len(t) - 1, (9 * len(t)) // 10)],
                            "calls": len(t), **mem})
            outputs[n].append(out)
        return runs, outputs
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def processes():
    """Each contender alone in --processes fresh processes, their turns rotating, each on the
    same core as the interleaved runs (the children inherit this process's CPUs)."""
    pinned = pin_to_one_core()
    where = f", on CPU {pinned}" if pinned is not None else ""
    names = ["original", "peer"] + (["compile"] if args.eager else []) + \
        (["onnxruntime"] if args.onnx else []) + ["ours"]
    base = [sys.executable, os.path.abspath(__file__), "--original", args.original, "--ours",
            args.ours, "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--threads",
            str(args.threads), "--min-seconds", str(args.min_seconds)] + \
        (["--onnx", args.onnx] if args.onnx else []) + \
        (["--eager", args.eager] if args.eager else []) + \
        (["--list"] if args.list else []) + \
        (["--shape", "x".join(map(str, args.shape))] if args.shape else [])
    runs = {n: [] for n in names}
    errors, failed = {}, {}  # failed: a contender that could not run, and why
    with tempfile.TemporaryDirectory() as work:
        outputs = {}
        if args.turns > 0:
            runs, outputs = in_turns(names, base, work, failed)
            names = [n for n in names if n not in failed]
        for k in range(args.processes if args.turns <= 0 else 0):
            order = names[k % len(names):] + names[:k % len(names)]
            for n in order:
                out = os.path.join(work, f"{n}.{k}.pt")
                r = subprocess.run(base + ["--child", n, "--child-output", out],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise SystemExit(f"python_peers.py: error: {n} in a fresh process: "
                                     f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
                runs[n].append(json.loads(r.stdout.strip().splitlines()[-1]))
                outputs.setdefault(n, []).append(out)
        ref = torch.load(outputs["original"][0])
        for n in names:
            errors[n] = max(output_error(ref, torch.load(o)) for o in outputs[n])

    def median(v):
        v = sorted(v)
        return v[len(v) // 2]
    rows = []
    orig = median([r["p50"] for r in runs["original"]])
    for n in names:
        p50s = [r["p50"] for r in runs[n]]
        rows.append({"name": n, "median_ms": median(p50s), "p50_min_ms": min(p50s),
                     "p50_max_ms": max(p50s), "spread": max(p50s) / min(p50s) - 1,
                     "p90_ms": median([r["p90"] for r in runs[n]]),
                     "rss_mib": median([r["rss_mib"] for r in runs[n]]),
                     "peak_mib": median([r["peak_mib"] for r in runs[n]]),
                     "vs_original": orig / median(p50s), "max_error": errors[n],
                     "wrong": not errors[n] <= wrong_above(),
                     **({"compile_s": median([r["compile_s"] for r in runs[n]])}
                        if n == "compile" else {})})
    model = os.path.basename(args.original).removesuffix(".pt")
    print(f"{model}: {args.processes} fresh processes per contender, at least {args.rounds} calls "
          f"and {args.min_seconds:g} s each" +
          (f", alive together and timed in turns of {args.turns:g} s" if args.turns > 0 else "") +
          f", {args.threads} thread(s), in Python{where}")
    print(f"  {'contender':<12} {'p50 ms':>8} {'p50 range':>15} {'spread':>7} {'p90 ms':>8} "
          f"{'RSS MiB':>8} {'peak':>7} {'vs original':>11} {'max error':>10}")
    for r in rows:
        rng = f"{r['p50_min_ms']:.3f}-{r['p50_max_ms']:.3f}"
        print(f"  {r['name']:<12} {r['median_ms']:>8.3f} {rng:>15} {100 * r['spread']:>6.1f}% "
              f"{r['p90_ms']:>8.3f} {r['rss_mib']:>8.1f} {r['peak_mib']:>7.1f} "
              f"{r['vs_original']:>10.2f}x {r['max_error']:>10.1e}"
              f"{'  WRONG' if r['wrong'] else ''}"
              f"{'  (compiled in %.1f s)' % r['compile_s'] if 'compile_s' in r else ''}")
    for n, why in failed.items():
        print(f"  {n:<12} failed: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.original, "threads": args.threads, "rounds": args.rounds,
                       "min_seconds": args.min_seconds, "turns": args.turns,
                       "pinned_cpu": pinned,
                       "processes": args.processes, "contenders": rows, "runs": runs,
                       "failed": failed}, f,
                      indent=1, sort_keys=True)


def pin_to_one_core():
    """Interleaved, every contender runs on the same cores: ONNX Runtime's Node.js child
    inherits this process's CPUs. Left free, the scheduler put the idle child on the other core,
    whose caches then kept ONNX Runtime's weights while the three in-process contenders evicted
    each other's (MobileNetV3-Small at batch 1: ours over ONNX Runtime 0.92-0.94x free,
    0.99-1.01x with both on one core)."""
    cpus = sorted(os.sched_getaffinity(0))
    if args.threads == 1 and len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[0]})
        return cpus[0]
    return None


def main():
    pinned = pin_to_one_core()
    torch.set_num_threads(args.threads)
    x = example_input()
    arg = [x] if args.list else x
    original = torch.jit.load(args.original).eval()
    peer = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.load(args.original).eval()))
    ours = xalloc.load(args.ours)
    import time

    def timed(m):
        def run():
            t0 = time.perf_counter()
            m(arg)
            return (time.perf_counter() - t0) * 1e3
        return run

    with tempfile.TemporaryDirectory() as work, torch.no_grad():
        contenders = [("original", timed(original)), ("peer", timed(peer))]
        ort = None
        if args.onnx:
            ort = OrtPeer(args.onnx, x, args.threads, work)
            contenders.append(("onnxruntime", ort.run))
        contenders.append(("ours", timed(ours)))
        ref = original(arg)
        outputs = {"original": ref, "peer": peer(arg), "ours": ours(arg)}
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
                     "wrong": not err <= wrong_above()})
    model = os.path.basename(args.original).removesuffix(".pt")
    where = f", all on CPU {pinned}" if pinned is not None else ""
    print(f"{model}: {args.rounds} rounds, {args.threads} thread(s), in Python{where}")
    print(f"  {'contender':<12} {'median ms':>9} {'p90 ms':>8} {'vs original':>11} {'max error':>10}")
    for r in rows:
        print(f"  {r['name']:<12} {r['median_ms']:>9.3f} {r['p90_ms']:>8.3f} {r['vs_original']:>10.2f}x "
              f"{r['max_error']:>10.1e}{'  WRONG' if r['wrong'] else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.original, "threads": args.threads, "rounds": args.rounds,
                       "pinned_cpu": pinned, "contenders": rows}, f, indent=1, sort_keys=True)


if args.child:
    child()
elif args.processes:
    processes()
else:
    main()
