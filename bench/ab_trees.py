#!/usr/bin/env python3
"""Two builds side by side: each contender is a rewritten model loaded by its own tree's
runtime (bench/python_peers.py of that tree, in a child process), ONNX Runtime beside them;
all alive together in P fresh processes each, timed in turns of 0.2 s on one core until each has
30 calls and 2 s. Prints each one's median p50 ms, the range over its processes, and each over
ONNX Runtime. What it answers: did a change of the code (not of the machine's phase) move a
model's speed.

  bench/ab_trees.py MODELS/resnet18-b1 old=/tmp/old:/tmp/old-ours.pt new=.:ours.pt [--ort]
(MODEL.pt and MODEL.onnx beside each other; TREE:OURS per contender; P=3 processes by default)
"""
import json
import os
import subprocess
import sys
import tempfile

base = os.path.abspath(sys.argv[1])
P, ROUNDS, MIN_S, TURN = int(os.environ.get("P", 3)), 30, 2.0, 0.2
contenders = []  # (label, tree, child, ours)
for spec in (a for a in sys.argv[2:] if "=" in a):
    label, rest = spec.split("=", 1)
    tree, ours = rest.split(":", 1)
    contenders.append((label, os.path.abspath(tree), "ours", os.path.abspath(ours)))
if not contenders:
    raise SystemExit("ab_trees.py: error: name at least one LABEL=TREE:OURS.pt")
if "--ort" in sys.argv:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    contenders.append(("ort", here, "onnxruntime", contenders[0][3]))
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
procs = []
work = tempfile.mkdtemp()
try:
    for label, tree, child, ours in contenders:
        for k in range(P):
            cmd = ["/usr/bin/python3", os.path.join(tree, "bench", "python_peers.py"),
                   "--original", base + ".pt", "--ours", ours, "--onnx", base + ".onnx",
                   "--rounds", str(ROUNDS), "--threads", "1", "--child", child,
                   "--child-output", os.path.join(work, f"{label}{k}.pt"), "--serve"]
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, cwd=tree)
            p.label = label
            procs.append(p)

    def ask(p, cmd):
        if cmd is not None:
            p.stdin.write(json.dumps(cmd) + "\n")
            p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"ab_trees.py: error: {p.label} stopped (run its python_peers.py "
                             "--child by hand to see why)")
        return json.loads(line)
    for p in procs:
        ask(p, None)  # loaded and warmed up
    ts, timed, turn = [[] for _ in procs], [0.0] * len(procs), 0
    while any(len(t) < ROUNDS or s < MIN_S for t, s in zip(ts, timed)):
        order = list(range(len(procs)))
        for k in order[turn % len(order):] + order[:turn % len(order)]:
            ms = ask(procs[k], {"time": TURN})["ms"]
            ts[k] += ms
            timed[k] += sum(ms) / 1e3
        turn += 1
    for p in procs:
        ask(p, {"finish": True})
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
p50s = {}
for p, t in zip(procs, ts):
    t.sort()
    p50s.setdefault(p.label, []).append(t[len(t) // 2])
med = {label: sorted(v)[len(v) // 2] for label, v in p50s.items()}
line = os.path.basename(base) + "  " + "  ".join(
    f"{label} {med[label]:.3f} [{min(p50s[label]):.3f}-{max(p50s[label]):.3f}]" for label in med)
if "ort" in med:
    line += "  | " + " ".join(f"{label}/ort {med['ort'] / med[label]:.3f}"
                              for label in med if label != "ort")
print(line, flush=True)
