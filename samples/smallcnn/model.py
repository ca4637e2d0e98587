"""SmallCNN: a compact image classifier written the usual torchvision way, the bundled CNN sample.

A stem convolution, two inverted-residual (MBConv) stages with depthwise convolutions, SiLU and
squeeze-and-excitation, a ResNet basic block with a residual add and ReLU, max pooling, and a
classifier head (global average pooling, flatten, Linear). Every convolution is followed by a
BatchNorm, which freezing folds into it. Its layout region (every op from the stem to the global
pooling) is what x-allocator times in each layout and rewrites as a whole.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.expand(F.silu(self.reduce(s))))
        return x * s


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.expand = conv_bn(cin, hidden, 1)
        self.depthwise = conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.se = SqueezeExcite(hidden, max(8, cin // 4))
        self.project = conv_bn(hidden, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.expand(x))
        y = F.silu(self.depthwise(y))
        y = self.project(self.se(y))
        return x + y if self.residual else y


class BasicBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = conv_bn(channels, channels, 3)
        self.conv2 = conv_bn(channels, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        return F.relu(self.conv2(y) + x)


class SmallCNN(nn.Module):
    def __init__(self, width: int = 32, classes: int = 100):
        super().__init__()
        self.stem = conv_bn(3, width, 3, stride=2)
        self.stage1 = nn.Sequential(MBConv(width, width, 1), MBConv(width, 2 * width, 2))
        self.stage2 = nn.Sequential(MBConv(2 * width, 2 * width, 1),
                                    MBConv(2 * width, 4 * width, 2))
        self.block = BasicBlock(4 * width)
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.stem(x))
        x = self.stage2(self.stage1(x))
        x = F.max_pool2d(self.block(x), 2)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)
