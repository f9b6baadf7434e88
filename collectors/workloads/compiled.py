"""`compile`: torch.compile three ways. `compile_resnet18` (a compiled ResNet-18-sized
network after its first calls), `compile_first_call` (the first call inside the profile:
Dynamo, AOT autograd, Inductor and Triton at work) and `compile_graph_breaks` (a model whose
forward breaks the graph three times)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..models import BranchyNet, ResNet
from .common import Options, profiled_run

SUMMARY = "torch.compile: steady state, a first call, graph breaks"

VARIANTS = ("resnet18", "first_call", "graph_breaks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", choices=["all", *VARIANTS], default="all", help="which run(s) to write")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default: inductor)")


def _train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def run(opts: Options, args: argparse.Namespace) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    out = []
    for variant in VARIANTS if args.variant == "all" else (args.variant,):
        torch._dynamo.reset()
        if variant == "graph_breaks":
            dim, batch = (1024, 256) if opts.cuda else (64, 16)
            model = BranchyNet(dim).to(opts.device)
            x, y = torch.randn(batch, dim, device=opts.device), torch.randn(batch, dim, device=opts.device)
        else:
            # ResNet-18-sized: four stages of two blocks (bottlenecks here, 10 classes).
            size, batch = (64, 64) if opts.cuda else (32, 4)
            model = ResNet(depths=(2, 2, 2, 2), width=64 if opts.cuda else 8, classes=10).to(opts.device)
            x, y = torch.randn(batch, 3, size, size, device=opts.device), torch.randn(batch, 10, device=opts.device)
        step = _train_step(torch.compile(model, backend=args.backend), x, y)
        if variant == "first_call":
            # Python stacks inside the compiler would make the trace huge: none here.
            first = Options(opts.logdir, opts.device, steps=2, repeat=1, warmup_steps=0, tables=opts.tables)
            out.append(profiled_run(first, "compile_first_call", step, samples=batch, wait=0, warmup=0,
                                    with_stack=False))
        else:
            out.append(profiled_run(opts, f"compile_{variant}", step, samples=batch))
    return out
