#!/usr/bin/env python3
"""Script SmallCNN (eval mode, seeded weights) and save it for xprof / xrewrite.

Usage: python samples/smallcnn/script.py -o OUT.pt [--batch N] [--size S]

The saved module carries `xalloc/example_inputs.json` (one image batch, N x 3 x S x S), so xprof
knows its inputs. It is saved unfrozen, as trained models are; `make rewrite` freezes it
(xrewrite --freeze).
"""
import argparse
import json
import os
import sys
import warnings

import torch

# TorchScript is deprecated upstream (2.11 on) and still what these files are written as.
warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", FutureWarning)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import SmallCNN  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = SmallCNN().eval()
    # Batch norms with statistics of their own, as a trained model has (not the identity).
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    scripted = torch.jit.script(model)
    spec = {"inputs": [{"name": "x", "shape": [args.batch, 3, args.size, args.size],
                        "dtype": "float32"}]}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    torch.jit.save(scripted, tmp,
                   _extra_files={"xalloc/example_inputs.json": json.dumps(spec, sort_keys=True)})
    os.replace(tmp, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
