"""`ddp`: data-parallel training over several processes (one per GPU, NCCL; gloo on the CPU),
with DistributedDataParallel or FSDP2 (`--fsdp`), optionally with one rank made slow
(`--straggler RANK`: extra matrix products before each forward on a GPU, a sleep on the CPU
where ranks share the cores; either way it reaches every collective late). Run it under torchrun, or give `--nproc N` and it starts torchrun itself.
Each rank writes its own trace into the run folder (worker `rank<N>`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..models import Decoder
from .common import Options, profiled_run

SUMMARY = "DDP or FSDP over several processes, --straggler RANK slows one"

# Extra work of the straggler each step on a GPU: (4096 x 4096) products; on the CPU a sleep,
# since extra work there would slow the other ranks sharing the cores too.
SLOW_PRODUCTS, SLOW_SIZE, SLOW_SLEEP_S = 30, 4096, 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=2, help="processes to start when not under torchrun (default 2)")
    parser.add_argument("--fsdp", action="store_true", help="shard with FSDP2 (fully_shard) instead of DDP")
    parser.add_argument("--straggler", type=int, default=None, metavar="RANK", help="make this rank slow")


def require_gpus(opts: Options, per_node: int) -> None:
    """Exit with a message when `per_node` ranks on CUDA cannot each have a GPU of this machine:
    NCCL needs one GPU per rank, and a rank without one fails with "invalid device ordinal"."""
    if not opts.cuda:
        return  # gloo ranks share the CPU
    have = torch.cuda.device_count()
    if per_node > have:
        raise SystemExit(f"ddp on CUDA runs one process per GPU: {per_node} asked for, this machine has {have} "
                         f"(use --nproc {have}, or --device cpu for ranks on the CPU over gloo)")


def launch(argv: list[str], opts: Options, nproc: int) -> int:
    """Start `nproc` copies of this workload under torchrun (one per GPU). `--nproc` is not
    passed on: the ranks do not need it, and torchrun would take it for its own option."""
    require_gpus(opts, nproc)
    rest, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--nproc="):
            skip = False
        elif arg == "--nproc":
            skip = True
        else:
            rest.append(arg)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "profboard.collectors", *rest]
    return subprocess.run(command, check=False).returncode


def run(opts: Options, args: argparse.Namespace) -> list[dict[str, Any]]:
    require_gpus(opts, int(os.environ.get("LOCAL_WORLD_SIZE", 1)))  # started by torchrun directly
    dist.init_process_group("nccl" if opts.cuda else "gloo")
    try:
        return _train(opts, args, dist.get_rank())
    finally:
        dist.destroy_process_group()


def _train(opts: Options, args: argparse.Namespace, rank: int) -> list[dict[str, Any]]:
    if opts.cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    else:
        torch.set_num_threads(1)  # ranks share the machine's cores
    device = torch.device("cuda", torch.cuda.current_device()) if opts.cuda else torch.device("cpu")
    torch.manual_seed(0)
    vocab, context, dim, layers, heads, batch = ((8192, 256, 512, 4, 8, 16) if opts.cuda else (512, 32, 64, 2, 4, 4))
    model = Decoder(vocab, context, dim, layers, heads).to(device)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    else:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if opts.cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids = torch.randint(vocab, (batch, context + 1), device=device, generator=None)
    slow = rank == args.straggler
    product = torch.randn(SLOW_SIZE, SLOW_SIZE, device=device) if slow and opts.cuda else None

    def step() -> None:
        if product is not None:
            for _ in range(SLOW_PRODUCTS):
                product @ product
        elif slow:
            time.sleep(SLOW_SLEEP_S)
        loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    name = ("fsdp" if args.fsdp else "ddp") + (f"_straggler_rank{args.straggler}" if args.straggler is not None else "")
    # Python stacks of every rank would make the run large; shapes give the collectives' sizes.
    return [profiled_run(opts, name, step, samples=batch, tokens=batch * context, with_stack=False,
                         profile_memory=False)]
