"""Profile small multi-GPU jobs for the Distributed view: one process per GPU, NCCL.

    torchrun --standalone --nproc_per_node=2 bench/make_dist_traces.py OUT_DIR --job NAME [--straggler RANK]

Writes the run folder OUT_DIR/<run> with one `*.pt.trace.json.gz` per rank, through
`torch.profiler.tensorboard_trace_handler` with its default `<host>_<pid>` worker names, as a
user's job would. Jobs:
- `ddp`: a small decoder trained with DistributedDataParallel (bucketed all-reduces that
  overlap the backward pass). With `--straggler RANK` that rank does extra matrix products
  before each forward, so it reaches every all-reduce late: the run is named
  `ddp_straggler_rank<RANK>`, else `ddp_balanced`.
- `fsdp`: the same model sharded with FSDP2 (`fully_shard`): all-gathers before each
  layer's forward and backward, reduce-scatters of its gradients.
Needs torch with CUDA and NCCL (run it on the device machine); profboard never imports torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_rule_traces import Block  # noqa: E402  (the same decoder block as the single-GPU jobs)

STEPS, WAIT, WARMUP = 6, 1, 2
# Extra work the straggler does per step: (4096 x 4096) products, about 0.14 ms each on an H200.
SLOW_PRODUCTS = 30


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[Block(512, 8) for _ in range(4)], nn.Linear(512, 512)).cuda()


def _wrap(job: str, model: nn.Module) -> nn.Module:
    if job == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model[:-1]:
            fully_shard(block)
        return fully_shard(model)
    return nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--job", choices=["ddp", "fsdp"], required=True)
    parser.add_argument("--straggler", type=int, default=None, help="rank that does extra work each step")
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    run = (f"{args.job}_straggler_rank{args.straggler}" if args.straggler is not None
           else {"ddp": "ddp_balanced", "fsdp": "fsdp"}[args.job])

    model = _wrap(args.job, _model())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 256, 512, device="cuda")
    y = torch.randn(16, 256, 512, device="cuda")
    slow = torch.randn(4096, 4096, device="cuda") if rank == args.straggler else None

    def step() -> None:
        if slow is not None:
            for _ in range(SLOW_PRODUCTS):
                slow @ slow
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):  # NCCL communicators and autotuning before the profile
        step()
    torch.cuda.synchronize()
    dist.barrier()

    tmp = Path(tempfile.mkdtemp())
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=STEPS - WAIT - WARMUP, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp), use_gzip=True),
                 record_shapes=True, with_stack=False) as prof:
        for _ in range(STEPS):
            step()
            prof.step()
    torch.cuda.synchronize()
    folder = args.out / run
    folder.mkdir(parents=True, exist_ok=True)
    for trace in tmp.glob("*.pt.trace.json.gz"):
        shutil.move(str(trace), folder / trace.name)
        print(f"rank {rank}: {run}/{trace.name} {(folder / trace.name).stat().st_size / 1e6:.2f} MB", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
