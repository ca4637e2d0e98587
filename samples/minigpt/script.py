#!/usr/bin/env python3
"""Script MinimalGPT with TorchScript and save it for xprof / xrewrite.

Usage: python samples/minigpt/script.py [--config CONFIG] [--weights W.pt] -o OUT.pt

The saved module carries `xalloc/example_inputs.json` in its extra files, so `xprof` knows
which inputs to feed it (shape, dtype, value range) without further flags.
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
from model import GPTConfig, MinimalGPT  # noqa: E402


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(here, "config.json"))
    ap.add_argument("--weights", help="state_dict saved by train.py (default: seeded init)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    cfg = GPTConfig.load(args.config)
    torch.manual_seed(cfg.seed)
    model = MinimalGPT(cfg).eval()
    if args.weights:
        model.load_state_dict(torch.load(args.weights))

    scripted = torch.jit.script(model)
    spec = {
        "inputs": [{
            "name": "idx",
            "shape": [cfg.batch_size, cfg.seq_len],
            "dtype": "int64",
            "low": 0,
            "high": cfg.vocab_size,
        }]
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    torch.jit.save(scripted, tmp,
                   _extra_files={"xalloc/example_inputs.json": json.dumps(spec, sort_keys=True)})
    os.replace(tmp, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
