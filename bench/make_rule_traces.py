"""Profile small CUDA jobs that exercise the torch.compile view and the recommendation rules.

    python bench/make_rule_traces.py OUT_DIR [--only NAME ...]

Writes one run folder per job under OUT_DIR (a `*.pt.trace.json.gz` each, through
`torch.profiler.tensorboard_trace_handler`), small enough to keep as test data:
- `compile_first_call`: a compiled model's first call (Dynamo tracing, AOT autograd, Inductor
  lowering and Triton compilation inside the profile) and one call after it;
- `launch_bound_eager`: a narrow MLP at batch 1, thousands of tiny kernels per step;
- `reduce_overhead`: the same model compiled with CUDA graphs (mode="reduce-overhead");
- `bf16_transformer`: a small decoder block trained under bf16 autocast with AdamW (fused),
  nothing wrong on purpose, to check that rules stay quiet;
- `item_logging`: the bf16 job calling `loss.item()` every step, as logging loops do.
Needs a CUDA GPU and torch (run it on the device machine); profboard itself never imports torch.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def _profiled(out: Path, name: str, step, steps: int, wait: int = 0, warmup: int = 0,
              with_stack: bool = True) -> None:
    folder = out / name
    tmp = Path(tempfile.mkdtemp())
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=wait, warmup=warmup, active=steps - wait - warmup, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp), worker_name="h200_worker0", use_gzip=True),
                 record_shapes=True, profile_memory=True, with_stack=with_stack) as prof:
        for _ in range(steps):
            step()
            prof.step()
    torch.cuda.synchronize()
    folder.mkdir(parents=True, exist_ok=True)
    for trace in tmp.glob("*.pt.trace.json.gz"):
        shutil.move(str(trace), folder / trace.name)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True,
                          attn_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device))[0]
        return x + self.mlp(self.norm2(x))


def _mlp(width: int = 64, depth: int = 12) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers).cuda()


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                autocast: bool = False, log_item: bool = False):
    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = nn.functional.mse_loss(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log_item:
            print(f"loss {loss.item():.4f}", end="\r")
    return step


def compile_first_call(out: Path) -> None:
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 32 * 32, 10)).cuda()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 3, 32, 32, device="cuda"), torch.randn(32, 10, device="cuda")
    # No Python stacks: tracing Dynamo and Inductor's own Python would make the trace huge.
    _profiled(out, "compile_first_call", _train_step(compiled, opt, x, y), steps=2, with_stack=False)


def launch_bound_eager(out: Path) -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1, 64, device="cuda"), torch.randn(1, 64, device="cuda")
    _profiled(out, "launch_bound_eager", _train_step(model, opt, x, y), steps=5, wait=1, warmup=1)


def reduce_overhead(out: Path) -> None:
    model = _mlp()
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(1, 64, device="cuda")

    def step() -> None:
        with torch.no_grad():
            compiled(x)
    for _ in range(4):  # compile and record the graphs before profiling
        step()
    _profiled(out, "reduce_overhead", step, steps=5, wait=1, warmup=1)


def bf16_transformer(out: Path, log_item: bool = False, name: str = "bf16_transformer") -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(256, 8) for _ in range(2)], nn.Linear(256, 256)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x, y = torch.randn(16, 128, 256, device="cuda"), torch.randn(16, 128, 256, device="cuda")
    _profiled(out, name, _train_step(model, opt, x, y, autocast=True, log_item=log_item), steps=5, wait=1, warmup=1)


JOBS = {
    "compile_first_call": compile_first_call,
    "launch_bound_eager": launch_bound_eager,
    "reduce_overhead": reduce_overhead,
    "bf16_transformer": bf16_transformer,
    "item_logging": lambda out: bf16_transformer(out, log_item=True, name="item_logging"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", choices=sorted(JOBS))
    args = parser.parse_args()
    for name in args.only or JOBS:
        print(f"{name} ...", flush=True)
        JOBS[name](args.out)
    for trace in sorted(args.out.rglob("*.pt.trace.json.gz")):
        print(f"{trace.relative_to(args.out)}: {trace.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
