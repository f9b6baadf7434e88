"""Small models for the workloads, written here so that no model package (torchvision, a hub
download) is needed: a bottleneck ResNet, a decoder-only transformer, and a net whose forward
makes torch.compile break its graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), with a projected shortcut when the shape changes."""

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * 4
        self.conv1, self.bn1 = nn.Conv2d(inputs, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out)
        self.shortcut = (nn.Sequential(nn.Conv2d(inputs, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                         if stride != 1 or inputs != out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """A bottleneck ResNet: `depths=(3, 4, 6, 3)` and `width=64` is ResNet-50."""

    def __init__(self, depths: tuple[int, ...] = (3, 4, 6, 3), width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        stages, inputs = [], width
        for i, depth in enumerate(depths):
            planes = width * 2 ** i
            blocks = []
            for j in range(depth):
                blocks.append(Bottleneck(inputs, planes, 2 if j == 0 and i > 0 else 1))
                inputs = planes * 4
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(inputs, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(self.norm1(x)).split(c, dim=2))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    """A decoder-only language model: token and position embeddings, causal blocks, a head."""

    def __init__(self, vocab: int, context: int, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[DecoderBlock(dim, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.norm(self.blocks(x)))


class BranchyNet(nn.Module):
    """An MLP whose forward makes torch.compile break the graph three times, as user code often
    does: a branch on a tensor's value, a value read with `.item()`, and an explicit break
    (standing in for a call Dynamo cannot trace)."""

    def __init__(self, dim: int = 256, layers: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.layers[0](x))
        if x.mean() > 0:                       # a branch on a tensor's value
            x = x * 2
        self.last_peak = x.abs().max().item()  # a value read on the host (for logging, say)
        x = F.relu(self.layers[1](x))
        torch._dynamo.graph_break()
        for layer in self.layers[2:]:
            x = F.relu(layer(x))
        return x
