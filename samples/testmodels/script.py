#!/usr/bin/env python3
"""Script the test models (models.py) and save each as OUT_DIR/<name>.pt with its example inputs.

Usage: python samples/testmodels/script.py OUT_DIR
"""
import json
import os
import sys
import warnings

import torch

# TorchScript is deprecated upstream (2.11 on) and still what these files are written as.
warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", FutureWarning)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, (cls, inputs) in sorted(MODELS.items()):
        torch.manual_seed(0)
        if getattr(cls, "TRACE", False):
            example = tuple(torch.randn(i["shape"]) for i in inputs)
            scripted = torch.jit.trace(cls().eval(), example)
        else:
            scripted = torch.jit.script(cls().eval())
        if getattr(cls, "FREEZE", False):
            scripted = torch.jit.freeze(scripted)
        path = os.path.join(out_dir, name + ".pt")
        tmp = path + ".tmp"
        torch.jit.save(scripted, tmp, _extra_files={
            "xalloc/example_inputs.json": json.dumps({"inputs": inputs}, sort_keys=True)})
        os.replace(tmp, path)
    print(f"wrote {len(MODELS)} test models to {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
