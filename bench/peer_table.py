#!/usr/bin/env python3
"""The README's tables from `make bench-peer`'s output: one row per model and batch, the
contenders in Python (p50 ms, p90, error against the original; WRONG beyond the tolerance),
interleaved in one process and each alone in fresh processes, with ours over ONNX Runtime, over
the TorchScript peer and over torch.compile (fresh processes only; its compile time in its
cell), and geometric means over the CNNs and over every row.

Usage: python bench/peer_table.py DIR [DIR...]   (bench-peer's OUT folders, or the
       folders of single models in them)

Models whose name is in TRANSFORMERS (or a sample not in CNN_SAMPLES) are left out of the CNN
means. A row without ONNX Runtime (a sample that does not export) has no ratio to it.
"""
import json
import math
import os
import sys

NAMES = {
    "squeezenet1_1": "SqueezeNet 1.1", "resnet18": "ResNet-18", "resnet50": "ResNet-50",
    "mobilenet_v3_small": "MobileNetV3-Small", "efficientnet_b0": "EfficientNet-B0",
    "shufflenet_v2_x1_0": "ShuffleNetV2 x1.0", "regnet_y_400mf": "RegNetY-400MF",
    "convnext_tiny": "ConvNeXt-T", "densenet121": "DenseNet-121", "swin_t": "Swin-T",
    "vit_b_16": "ViT-B/16", "minigpt": "MinimalGPT (sample)", "smallcnn": "SmallCNN (sample)",
}
TRANSFORMERS = {"swin_t", "vit_b_16", "minigpt"}
CONTENDERS = ["original", "peer", "compile", "onnxruntime", "ours"]


def gm(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def contenders(path):
    """The contenders of one of python_peers.py's JSON files by name ({"failed": why} for one
    that could not run); {} when there is none."""
    if not os.path.isfile(path):
        return {}
    doc = json.load(open(path))
    found = {c["name"]: c for c in doc["contenders"]}
    for name, why in doc.get("failed", {}).items():
        found[name] = {"failed": why}
    return found


def rows_of(out_dirs):
    rows = []
    for out in out_dirs:
        # A model's folder itself, or an OUT folder of them.
        model_dir = any(os.path.isfile(os.path.join(out, f))
                        for f in ("python.json", "processes.json")) or any(
            e.startswith("threads") for e in os.listdir(out))
        dirs = [out] if model_dir else [os.path.join(out, e) for e in sorted(os.listdir(out))]
        for d in dirs:
            if not os.path.isdir(d):
                continue
            entry = os.path.basename(os.path.normpath(d))
            base, _, batch = entry.rpartition("-b")
            if not base or not batch.isdigit():
                base, batch = entry, "1"  # a sample: its own stored inputs
            python = contenders(os.path.join(d, "python.json"))
            # The same contenders at other thread counts (bench-peer's MORE_THREADS).
            threads = {int(e[7:]): contenders(os.path.join(d, e, "processes.json"))
                       for e in sorted(os.listdir(d)) if e.startswith("threads") and e[7:].isdigit()}
            threads = {t: c for t, c in threads.items() if c}
            fresh = contenders(os.path.join(d, "processes.json"))
            if not python and not threads and not fresh:
                continue  # (fresh processes alone: python_peers.py --processes without bench-peer)
            rows.append({"model": base, "batch": int(batch), "python": python,
                         "fresh": fresh, "threads": threads})
    order = list(NAMES)
    rows.sort(key=lambda r: (r["batch"], order.index(r["model"]) if r["model"] in order else 99,
                             r["model"]))
    return rows


def cell(c, fresh=False):
    if not c:
        return "–"
    if "failed" in c:
        return "failed"
    if fresh:
        text = f"{c['median_ms']:.2f}, {100 * c['spread']:.1f}%, {c['rss_mib']:.0f} MiB"
        if c.get("compile_s") is not None:
            text += f", compiled in {c['compile_s']:.0f} s"
    else:
        err = c["max_error"]
        text = f"{c['median_ms']:.2f} ({c['p90_ms']:.2f}) " + (f"{err:.0e}" if err else "0")
    return text + (" **WRONG**" if c["wrong"] else "")


def ratio(a, b):
    return b["median_ms"] / a["median_ms"] if a and b and "failed" not in b else None


def fmt(x):
    return f"{x:.2f}×" if x else "–"


def table(rows, key, title):
    print(title)
    print()
    print("| model | batch | original | peer | torch.compile | ONNX Runtime | ours | ours / ORT "
          "| ours / peer | ours / compile |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    means = {f"{scope}_{k}": [] for scope in ("cnn", "all")
             for k in ("ort", "peer", "orig", "compile")}
    for r in rows:
        c = r[key] if not isinstance(key, int) else r["threads"].get(key)
        if not c:
            continue
        ours = c.get("ours")
        vs_ort, vs_peer = ratio(ours, c.get("onnxruntime")), ratio(ours, c.get("peer"))
        vs_orig, vs_compile = ratio(ours, c.get("original")), ratio(ours, c.get("compile"))
        cnn = r["model"] not in TRANSFORMERS
        for k, v in (("ort", vs_ort), ("peer", vs_peer), ("orig", vs_orig),
                     ("compile", vs_compile)):
            means["all_" + k].append(v)
            if cnn:
                means["cnn_" + k].append(v)
        print(f"| {NAMES.get(r['model'], r['model'])} | {r['batch']} | "
              + " | ".join(cell(c.get(n), key != "python") for n in CONTENDERS)
              + f" | {fmt(vs_ort)} | {fmt(vs_peer)} | {fmt(vs_compile)} |")
    print()
    for scope, label in (("cnn", "CNNs"), ("all", "every row")):
        print(f"- geometric mean over {label}: ours {fmt(gm(means[scope + '_orig']))} the "
              f"original, {fmt(gm(means[scope + '_peer']))} the peer, "
              f"{fmt(gm(means[scope + '_ort']))} ONNX Runtime, "
              f"{fmt(gm(means[scope + '_compile']))} torch.compile")
    print()


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for d in sys.argv[1:]:
        if not os.path.isdir(d):
            print(f"peer_table.py: {d}: no such folder (bench-peer's OUT)", file=sys.stderr)
            return 2
    rows = rows_of(sys.argv[1:])
    if not rows:
        print(f"peer_table.py: no python.json (nor processes.json, threadsN/processes.json) under "
              f"{' '.join(sys.argv[1:])}", file=sys.stderr)
        return 2
    if any(r["python"] for r in rows):
        table(rows, "python", "Interleaved in one Python process (p50 ms, p90 in parentheses, "
                              "error against the original's outputs):")
    if any(r["fresh"] for r in rows):
        table(rows, "fresh", "Each alone in fresh Python processes (median of the processes' "
                             "p50 ms, their spread, resident memory):")
    for t in sorted({t for r in rows for t in r["threads"]}):
        table(rows, t, f"At {t} threads (profiled, planned and run at {t}; ONNX Runtime with {t} "
                       "intra-op threads), each alone in fresh Python processes:")
    return 0


if __name__ == "__main__":
    sys.exit(main())
