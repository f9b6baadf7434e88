"""`resnet50`: ResNet-50 trained with SGD on synthetic images served by a DataLoader with
worker processes, in fp32 or under bf16 autocast."""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn

from ..models import ResNet
from .common import SNAPSHOT_STEPS, Options, autocast, profiled_run

SUMMARY = "ResNet-50 with a multi-worker DataLoader, fp32 or --amp bf16"


class SyntheticImages(torch.utils.data.Dataset):
    """Random images and labels, made in the loader's worker processes (seeded by index)."""

    def __init__(self, length: int, size: int, classes: int) -> None:
        self.length, self.size, self.classes = length, size, classes

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index)
        return torch.randn(3, self.size, self.size, generator=g), int(torch.randint(self.classes, (1,), generator=g))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--amp", choices=["none", "bf16"], default="none", help="bf16 autocast (default: fp32)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 64 on CUDA, 4 on the CPU")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes (default: 2)")


def run(opts: Options, args: argparse.Namespace) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    # The CPU variant is a narrow, shallow ResNet on small images, so that CI can run it.
    batch, size, model = ((args.batch_size or 64, 224, ResNet()) if opts.cuda
                          else (args.batch_size or 4, 64, ResNet(depths=(1, 1, 1, 1), width=16, classes=100)))
    model = model.to(opts.device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    steps = opts.warmup_steps + (2 + opts.steps) * opts.repeat + (SNAPSHOT_STEPS if opts.snapshot else 0)
    loader = torch.utils.data.DataLoader(SyntheticImages(steps * batch, size, model.head.out_features),
                                         batch_size=batch, num_workers=args.workers, pin_memory=opts.cuda,
                                         persistent_workers=args.workers > 0)
    batches = iter(loader)

    def step() -> None:
        images, labels = next(batches)
        images = images.to(opts.device, non_blocking=True).to(memory_format=torch.channels_last)
        labels = labels.to(opts.device, non_blocking=True)
        with autocast(opts, args.amp):
            loss = loss_fn(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    name = "resnet50_fp32" if args.amp == "none" else f"resnet50_amp_{args.amp}"
    return [profiled_run(opts, name, step, samples=batch)]
