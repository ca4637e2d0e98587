#!/usr/bin/python3
"""Train MinimalGPT for a few steps on synthetic data and save its state_dict.

Usage: /usr/bin/python3 samples/minigpt/train.py [--config CONFIG] [--steps N] -o W.pt

The task is next-token prediction on sequences that count upwards modulo the vocabulary, so
the loss visibly drops within a few dozen steps on a CPU. `script.py --weights W.pt` then
scripts the trained model.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import GPTConfig, MinimalGPT  # noqa: E402


def batch(cfg: GPTConfig, batch_size: int, seq_len: int, gen: torch.Generator):
    start = torch.randint(0, cfg.vocab_size, (batch_size, 1), generator=gen)
    seq = (start + torch.arange(seq_len + 1)) % cfg.vocab_size
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(here, "config.json"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    cfg = GPTConfig.load(args.config)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    model = MinimalGPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        x, y = batch(cfg, cfg.batch_size, cfg.seq_len, gen)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}", file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    torch.save(model.state_dict(), args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
