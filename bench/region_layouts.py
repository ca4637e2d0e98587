#!/usr/bin/env python3
"""Each layout region's candidates as xprof timed them, and the one xsched chose: ATen's
channels-last against the runtime's packed ops (libtorch's oneDNN ops with packed weights, fused
activations, the residual add) and libtorch's blocked MKLDNN tensors, region by region, from the
profile.json and schedule.json that `make bench-peer` and `make bench-families` leave per model.

Usage: python bench/region_layouts.py DIR [DIR...]   (folders holding profile.json and
       schedule.json, or folders of such folders)

Prints one markdown row per region of at least --min-ms (default 0.5 ms as it is): its ops and
convolutions, each candidate's median ms (paired against the region as it is, in the same
rounds), the chosen layout, and, over every region, how often each candidate was the fastest.
"""
import argparse
import json
import os
import sys

# Columns: a 2-D region's candidates and a 3-D one's share them (channels_last_3d as
# channels_last), and a linear region's packed weight on row-major activations is its own.
LAYOUTS = ["contiguous", "channels_last", "channels_last+packed", "channels_last+packed+add",
           "contiguous+packed", "blocked"]


def column(layout):
    return layout.replace("channels_last_3d", "channels_last")


def model_dirs(roots):
    for root in roots:
        if os.path.isfile(os.path.join(root, "profile.json")):
            yield root
            continue
        for entry in sorted(os.listdir(root)):
            d = os.path.join(root, entry)
            if os.path.isfile(os.path.join(d, "profile.json")):
                yield d
            # bench-peer's other thread counts
            for sub in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if os.path.isfile(os.path.join(d, sub, "profile.json")):
                    yield os.path.join(d, sub)


def chosen_layouts(schedule_path):
    """region id -> the layout the schedule runs it in (absent: left as it is)."""
    if not os.path.isfile(schedule_path):
        return {}
    chosen = {}
    for d in json.load(open(schedule_path))["decisions"]:
        if d.get("rule") == "region" and d.get("region_layout") and d.get("region"):
            chosen[d["region"]["id"]] = d["region_layout"]
    return chosen


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+")
    p.add_argument("--min-ms", type=float, default=0.5)
    args = p.parse_args()
    for d in args.dirs:
        if not os.path.isdir(d):
            print(f"region_layouts.py: {d}: no such folder", file=sys.stderr)
            return 2
    print("| model | region | ops | convs | " + " | ".join(LAYOUTS) + " | chosen |")
    print("|---|---:|---:|---:|" + "---:|" * len(LAYOUTS) + "---|")
    unknown = set()
    fastest = {}
    rows = 0
    for d in model_dirs(args.dirs):
        profile = json.load(open(os.path.join(d, "profile.json")))
        chosen = chosen_layouts(os.path.join(d, "schedule.json"))
        name = os.path.relpath(d, os.path.dirname(os.path.normpath(args.dirs[0])))
        for r in profile.get("regions", []):
            times = {column(c["layout"]): c["time_ms"] for c in r.get("candidates", [])
                     if c.get("measured") and c.get("time_ms") is not None}
            if times.get("contiguous", 0.0) < args.min_ms or len(times) < 2:
                continue
            unknown |= set(times) - set(LAYOUTS)
            best = min(times, key=times.get)
            fastest[best] = fastest.get(best, 0) + 1
            rows += 1
            cells = [f"{times[k]:.2f}" if k in times else "–" for k in LAYOUTS]
            cells = [f"**{c}**" if k == best else c for k, c in zip(LAYOUTS, cells)]
            print(f"| {name} | {r['id']} | {len(r.get('nodes', []))} | "
                  f"{r.get('convolutions', 0)} | " + " | ".join(cells)
                  + f" | {chosen.get(r['id'], 'as it is')} |")
    if unknown:
        print(f"region_layouts.py: candidates without a column: {', '.join(sorted(unknown))}",
              file=sys.stderr)
    print()
    print(f"fastest candidate over {rows} regions: "
          + ", ".join(f"{k} {fastest[k]}" for k in LAYOUTS if k in fastest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
