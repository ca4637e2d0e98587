"""Small TorchScript models the test suite profiles and rewrites, each built around one layout
pattern the tools must handle:

- TokenMixer: MLP-Mixer style token mixing, Linear and GELU applied to transposed activations,
  one transposed value feeding several consumers (conversion sites worth a `sync`); a second
  exported method, `mix_tokens`.
- Redundant: conversions of tensors that are already contiguous (sites worth a `remove`), next to
  a conversion `view` needs (which must stay).
- Control: a loop and a branch around strided values, and a `with torch.no_grad():` block
  (exercises the profiling interpreter).
- Forked: uses torch.jit.fork, which xprof does not run: it must say so clearly.
- ShuffleCNN: ShuffleNet-style units (channel split with chunk, concatenation, channel shuffle
  through view + transpose) and a per-pixel Linear applied through permutes.
- FrozenMLP: two Linears of a model frozen with torch.jit.freeze (weights are constants).
- TracedMixer: TokenMixer saved with torch.jit.trace, whose source ranges are Python stacks,
  not source code.
- TinyCNN: one layout region, small enough for unit tests: convolutions with batch norms,
  a depthwise convolution with SiLU, squeeze-and-excitation, a residual add with ReLU, pooling,
  then flatten and a Linear (outside the region).
- ResBlocks: three ResNet basic blocks in a row as torchvision writes them (`out += identity`;
  the first block's output is the second's residual, the third's downsampling is computed after
  its conv2).
- FireNet: two SqueezeNet Fire modules (a squeeze convolution, two expand convolutions whose
  outputs torch.cat joins) between a stem and a global pooling: one layout region through the
  concatenations.
- SegNet: a segmenter as torchvision writes one (LR-ASPP's head): the backbone hands its
  features to the head in a dict (IntermediateLayerGetter's), the head resizes with
  F.interpolate (whose branch on the input's rank sits in the graph) and adds two classifiers.
- Attention: a ViT-style encoder block (patch tokens from flatten + transpose,
  nn.MultiheadAttention, MLP).
"""
from typing import Dict, List

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

    @torch.jit.export
    def mix_tokens(self, x: torch.Tensor) -> torch.Tensor:
        # A second method with the same linears: a schedule made for one method must not be
        # applied to look-alike expressions of the other.
        return self.token_fc2(F.gelu(self.token_fc1(x.transpose(1, 2))))


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
        with torch.no_grad():  # a context manager: prim::Enter / prim::Exit around the block
            m = h.mean()
        return torch.stack(acc).sum(0) + m


def _half(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5


class Forked(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fut = torch.jit.fork(_half, x)
        return torch.jit.wait(fut) + x


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        half = channels // 2
        self.pw1 = nn.Conv2d(half, half, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(half)
        self.dw = nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False)
        self.bn2 = nn.BatchNorm2d(half)
        self.pw2 = nn.Conv2d(half, half, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=1)
        y = F.relu(self.bn1(self.pw1(x2)))
        y = self.pw2(self.bn2(self.dw(y)))
        return channel_shuffle(torch.cat([x1, F.relu(y)], dim=1), 2)


class ShuffleCNN(nn.Module):
    def __init__(self, channels: int = 24, classes: int = 10):
        super().__init__()
        self.units = nn.ModuleList([ShuffleUnit(channels) for _ in range(2)])
        self.mix = nn.Linear(channels, channels)  # per pixel, over channels
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.units:
            x = unit(x)
        y = self.mix(x.permute(0, 2, 3, 1))  # NCHW -> NHWC
        x = x + F.gelu(y).permute(0, 3, 1, 2)
        return self.head(x.mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, channels: int = 32, dim: int = 64, heads: int = 4):
        super().__init__()
        self.embed = nn.Conv2d(channels, dim, 2, stride=2)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.embed(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
        h = self.norm1(t)
        a, _ = self.attn(h, h, h, need_weights=False)
        t = t + a
        return t + self.mlp(self.norm2(t))


class Overlap(nn.Module):
    """A transposed activation whose projection could wait: an independent branch runs between
    the transpose and its consumer, leaving a core idle where the conversion can run."""

    def __init__(self, dim: int = 128):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.branch = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = x.transpose(1, 2)  # [B, dim, tokens]: read by proj only after the branch
        b = self.branch(y)
        return self.proj(t).sum(1) + b.sum(1)


class FrozenMLP(nn.Module):
    """Deployed with torch.jit.freeze: the Linear weights become constants, so a weight's
    transpose is known before the model runs and converting it costs nothing per call."""

    FREEZE = True

    def __init__(self, dim: int = 512):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class TinyCNN(nn.Module):
    def __init__(self, c: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(c)
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.se_reduce = nn.Conv2d(c, 4, 1)
        self.se_expand = nn.Conv2d(4, c, 1)
        self.pw = nn.Conv2d(c, c, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn0(self.stem(x)))
        y = F.silu(self.bn1(self.dw(x)))
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(F.adaptive_avg_pool2d(y, 1)))))
        y = self.bn2(self.pw(y * s))
        x = F.max_pool2d(F.relu(x + y), 2)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = stride != 1 or cin != cout
        self.ds = nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.down:
            identity = self.ds(x)
        out += identity
        return F.relu(out)


class ResBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = BasicBlock(16, 16, 1)
        self.b2 = BasicBlock(16, 16, 1)
        self.b3 = BasicBlock(16, 32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(self.b3(self.b2(self.b1(F.relu(self.stem(x))))), 1)


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3x3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1x1(x)), F.relu(self.expand3x3(x))], 1)


class FireNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.fire1 = Fire(16, 8, 16)
        self.fire2 = Fire(32, 8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, ceil_mode=True)
        return F.adaptive_avg_pool2d(self.fire2(self.fire1(x)), 1)


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 2 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(2 * growth)
        self.conv2 = nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False)
        self.memory_efficient = False  # torchvision's flag: its branch survives scripting

    def bottleneck(self, features: List[torch.Tensor]) -> torch.Tensor:
        return self.conv1(F.relu(self.norm1(torch.cat(features, 1))))

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        if self.memory_efficient and features[0].requires_grad:
            out = self.bottleneck([f.detach() for f in features])
        else:
            out = self.bottleneck(features)
        return self.conv2(F.relu(self.norm2(out)))


class DenseNetLike(nn.Module):
    """DenseNet's dense blocks as torchvision writes them: a list of feature maps grown with
    append, each layer reading the concatenation of all before it; a transition between blocks."""

    def __init__(self, growth: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.block1 = nn.ModuleList([DenseLayer(16 + i * growth, growth) for i in range(3)])
        self.trans_norm = nn.BatchNorm2d(16 + 3 * growth)
        self.trans_conv = nn.Conv2d(16 + 3 * growth, 24, 1, bias=False)
        self.block2 = nn.ModuleList([DenseLayer(24 + i * growth, growth) for i in range(2)])
        self.norm = nn.BatchNorm2d(24 + 2 * growth)
        self.head = nn.Linear(24 + 2 * growth, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [F.max_pool2d(F.relu(self.stem(x)), 2)]
        for layer in self.block1:
            features.append(layer(features))
        x = torch.cat(features, 1)
        x = F.avg_pool2d(self.trans_conv(F.relu(self.trans_norm(x))), 2)
        features = [x]
        for layer in self.block2:
            features.append(layer(features))
        x = F.relu(self.norm(torch.cat(features, 1)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SegNet(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.low = nn.Conv2d(8, 16, 3, 1, 1)
        self.high = nn.Conv2d(16, 24, 3, 2, 1)
        self.cbr = nn.Sequential(nn.Conv2d(24, 16, 1, bias=False), nn.BatchNorm2d(16),
                                 nn.ReLU(inplace=True))
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(24, 16, 1), nn.Sigmoid())
        self.low_classifier = nn.Conv2d(16, classes, 1)
        self.high_classifier = nn.Conv2d(16, classes, 1)

    def features(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        out: Dict[str, torch.Tensor] = {}
        x = F.relu(self.low(F.relu(self.stem(x))))
        out["low"] = x
        out["high"] = F.relu(self.high(x))
        return out

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        size = x.shape[-2:]
        f = self.features(x)
        low, high = f["low"], f["high"]
        y = self.cbr(high) * self.scale(high)
        y = F.interpolate(y, size=low.shape[-2:], mode="bilinear", align_corners=False)
        y = self.low_classifier(low) + self.high_classifier(y)
        result: Dict[str, torch.Tensor] = {}
        result["out"] = F.interpolate(y, size=size, mode="bilinear", align_corners=False)
        return result


class TracedMixer(TokenMixer):
    """TokenMixer as torch.jit.trace records it (the usual export of Hugging Face models): each
    node's source range is the Python stack the tracer saw, not an expression."""

    TRACE = True


MODELS = {
    "mixer": (TokenMixer, [{"name": "x", "shape": [8, 64, 96], "dtype": "float32"}]),
    "redundant": (Redundant, [{"name": "x", "shape": [128, 64], "dtype": "float32"}]),
    "control": (Control, [{"name": "x", "shape": [32, 32], "dtype": "float32"}]),
    "forked": (Forked, [{"name": "x", "shape": [4, 4], "dtype": "float32"}]),
    "shufflecnn": (ShuffleCNN, [{"name": "x", "shape": [4, 24, 32, 32], "dtype": "float32"}]),
    "attention": (Attention, [{"name": "x", "shape": [4, 32, 16, 16], "dtype": "float32"}]),
    "overlap": (Overlap, [{"name": "x", "shape": [8, 128, 128], "dtype": "float32"},
                          {"name": "y", "shape": [8, 128, 128], "dtype": "float32"}]),
    "traced": (TracedMixer, [{"name": "x", "shape": [8, 64, 96], "dtype": "float32"}]),
    "frozen": (FrozenMLP, [{"name": "x", "shape": [4, 512], "dtype": "float32"}]),
    "tinycnn": (TinyCNN, [{"name": "x", "shape": [2, 3, 32, 32], "dtype": "float32"}]),
    "firenet": (FireNet, [{"name": "x", "shape": [2, 3, 40, 40], "dtype": "float32"}]),
    "resblocks": (ResBlocks, [{"name": "x", "shape": [2, 3, 24, 24], "dtype": "float32"}]),
    "densenet": (DenseNetLike, [{"name": "x", "shape": [2, 3, 32, 32], "dtype": "float32"}]),
    "segnet": (SegNet, [{"name": "x", "shape": [1, 3, 48, 48], "dtype": "float32"}]),
}
