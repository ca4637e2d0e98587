"""Schedules for the comparison policies, derived from xsched's own schedule.

  policies.py contiguous SCHEDULE OUT   every site that can be converted without changing
                                        results is converted (sync), existing conversions kept
  policies.py strip SCHEDULE OUT        every existing aten::contiguous removed where legal
                                        (its consumers accept the input, results unchanged)
  policies.py hidden SCHEDULE           ms of conversion the plan hides in idle windows
"""
import json
import sys

mode, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))
if mode == "hidden":
    print(f"{sum(d['predicted_cost_ms'] for d in s['decisions'] if d['action'] == 'async'):.4f}")
    sys.exit(0)
n = 0
for d in s["decisions"]:
    is_remove_site = d.get("input_anchor") is not None
    if mode == "contiguous":
        if is_remove_site:
            d["action"] = "none"
        elif d["consumers"] and d["action"] in ("none", "async", "sync"):
            d["action"], d["window_id"] = "sync", None
            n += 1
    elif mode == "strip":
        legal = not any(k in d["reason"] for k in ("needs a contiguous", "written in place",
                                                     "different output bits", "changes layout",
                                                     "could not be measured", "not recorded"))
        d["action"], d["window_id"] = ("remove" if is_remove_site and legal else "none"), None
        n += d["action"] == "remove"
json.dump(s, open(sys.argv[3], "w"))
print(f"{mode}: {n} site(s)", file=sys.stderr)
