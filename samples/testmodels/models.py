"""Small TorchScript models the test suite profiles and rewrites, each built around one layout
pattern the tools must handle:

- TokenMixer: MLP-Mixer style token mixing, Linear and GELU applied to transposed activations,
  one transposed value feeding several consumers (conversion sites worth a `sync`).
- Redundant: conversions of tensors that are already contiguous (sites worth a `remove`), next to
  a conversion `view` needs (which must stay).
- Control: a loop and a branch around strided values (exercises the profiling interpreter).
- Forked: uses torch.jit.fork, which xprof does not run: it must say so clearly.
"""
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenMixer(nn.Module):
    def __init__(self, tokens: int = 64, channels: int = 96, hidden: int = 128):
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.token_fc1 = nn.Linear(tokens, hidden)
        self.token_fc2 = nn.Linear(hidden, tokens)
        self.gate = nn.Linear(tokens, tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x).transpose(1, 2)  # [B, C, T]: tokens become the feature dimension
        h = self.token_fc2(F.gelu(self.token_fc1(y)))
        g = torch.sigmoid(self.gate(y))
        return x + (h * g).transpose(1, 2)


class Redundant(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x).contiguous()  # already contiguous: pure overhead
        h = torch.relu(h).contiguous()  # again
        t = h.transpose(0, 1).contiguous()  # needed: view below refuses a transposed tensor
        return t.view(-1) * 2.0


class Control(nn.Module):
    def __init__(self, dim: int = 32, steps: int = 3):
        super().__init__()
        self.steps = steps
        self.lin = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc: List[torch.Tensor] = []
        h = x
        for i in range(self.steps):
            h = torch.tanh(self.lin(h.t()).t())
            if i % 2 == 0:
                acc.append(h.sum(0))
            else:
                acc.append(h.amax(1))
        return torch.stack(acc).sum(0) + h.mean()


def _half(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5


class Forked(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fut = torch.jit.fork(_half, x)
        return torch.jit.wait(fut) + x


MODELS = {
    "mixer": (TokenMixer, [{"name": "x", "shape": [8, 64, 96], "dtype": "float32"}]),
    "redundant": (Redundant, [{"name": "x", "shape": [128, 64], "dtype": "float32"}]),
    "control": (Control, [{"name": "x", "shape": [32, 32], "dtype": "float32"}]),
    "forked": (Forked, [{"name": "x", "shape": [4, 4], "dtype": "float32"}]),
}
