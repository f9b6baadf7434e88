"""`loss_sync`: a classifier whose custom loss makes the host wait for the GPU every step
(class weights built on the CPU and copied over, a Python branch on the loss's value, an
index made on the CPU); `--fixed` computes the same loss without any of them."""

from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..profiling import marked
from .common import Options, profiled_run

SUMMARY = "a custom loss with host-device syncs (--fixed: without them)"

CLASSES = 100
# (batch, hidden width) on CUDA: enough GPU work per step that a sync leaves the GPU idle while the
# host catches up. With a smaller model the host is always behind, a sync costs nothing and the
# fixed loss is no faster (on an H200: 4 to 5 ms steps either way at (256, 1024); 6.5 ms before
# and 4.2 ms after at this size).
CUDA_SIZE = (4096, 2048)


def slow_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    weight = torch.linspace(0.5, 1.5, CLASSES).to(logits.device)   # pageable copy to the GPU
    loss = F.cross_entropy(logits, target, weight=weight)
    if loss > 10:                                                  # reads the loss on the host
        loss = loss.clamp(max=10)
    rows = torch.arange(logits.shape[0]).to(logits.device)         # another copy
    return loss + 0.01 * logits[rows, target].min()


class FixedLoss(nn.Module):
    """The same loss with the weights kept on the device and no host reads."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("weight", torch.linspace(0.5, 1.5, CLASSES))

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(logits, target, weight=self.weight).clamp(max=10)
        rows = torch.arange(logits.shape[0], device=logits.device)
        return loss + 0.01 * logits[rows, target].min()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fixed", action="store_true", help="the loss without host-device syncs")
    parser.add_argument("--batch-size", type=int, default=None, help=f"default: {CUDA_SIZE[0]} on CUDA, 32 on the CPU")
    parser.add_argument("--dim", type=int, default=None, help=f"hidden width, default: {CUDA_SIZE[1]} on CUDA, 128 on the CPU")


def run(opts: Options, args: argparse.Namespace) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    batch, dim = CUDA_SIZE if opts.cuda else (32, 128)
    batch, dim = args.batch_size or batch, args.dim or dim
    model = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                          nn.Linear(dim, CLASSES)).to(opts.device)
    loss_fn = FixedLoss().to(opts.device) if args.fixed else slow_loss
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, dim, device=opts.device)
    y = torch.randint(CLASSES, (batch,), device=opts.device)

    def step() -> None:
        with marked("loss"):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return [profiled_run(opts, "loss_sync_after" if args.fixed else "loss_sync_before", step, samples=batch)]
