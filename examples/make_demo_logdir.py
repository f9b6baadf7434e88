#!/usr/bin/env python3
"""Regenerate profboard's small bundled demo logdir from real torch.profiler runs.

Standalone: needs torch (and torchvision for the ResNet run), never profboard.

    python examples/make_demo_logdir.py --out examples/logdir [--device cuda|cpu]

Each run is a sub-folder of --out holding the files that
``torch.profiler.tensorboard_trace_handler(dir, worker_name="worker0", use_gzip=True)``
writes (``worker0.<time_ns>.pt.trace.json.gz``, one file per profiled span):

* ``resnet18_dataloader``: torchvision resnet18 (random init, fp32) trained with SGD on
  synthetic images served by a DataLoader with 2 worker processes; schedule
  wait=1, warmup=1, active=3, repeat=2 (two spans); shapes, memory, stacks, modules.
* ``gpt_tiny_bf16``: a tiny decoder-only transformer (causal SDPA attention) trained with
  AdamW under bf16 autocast; one span; shapes and memory, no stacks.

``--device cpu`` uses smaller sizes so that the script can be checked without a GPU (and
falls back to a small conv net when torchvision is not installed). The bundled demo logdir
is made with ``--device cuda`` on a GPU machine (the committed one: torch 2.11.0+cu130,
torchvision 0.26.0, one NVIDIA H100 80GB HBM3; about 19 s, 1.0 MB in all).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WORKER_NAME = "worker0"


# --------------------------------------------------------------------------- helpers


def _activities(device: str):
    acts = [ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def _prepare_run_dir(out: str, run: str) -> str:
    path = os.path.join(out, run)
    os.makedirs(path, exist_ok=True)
    # Regeneration replaces a run's traces instead of adding spans to the old ones.
    for old in glob.glob(os.path.join(path, "*.pt.trace.json*")):
        os.remove(old)
    return path


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- resnet18 + DataLoader


class SyntheticImages(torch.utils.data.Dataset):
    """Random images and labels, made on the fly in the loader's worker processes."""

    def __init__(self, length: int, image_size: int, num_classes: int):
        self.length = length
        self.image_size = image_size
        self.num_classes = num_classes

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        g = torch.Generator().manual_seed(index)
        image = torch.randn(3, self.image_size, self.image_size, generator=g)
        label = int(torch.randint(0, self.num_classes, (1,), generator=g))
        return image, label


class SmallConvNet(nn.Module):
    """CPU-check fallback used only when torchvision is not installed."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 128, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def _resnet18(num_classes: int, device: str) -> nn.Module:
    try:
        import torchvision
    except ImportError:
        if device == "cuda":
            raise SystemExit("torchvision is required for --device cuda (the demo uses its resnet18)")
        print("  torchvision not installed: using a small conv net for the CPU check", file=sys.stderr)
        return SmallConvNet(num_classes)
    return torchvision.models.resnet18(weights=None, num_classes=num_classes)


def run_resnet18_dataloader(out: str, device: str) -> None:
    path = _prepare_run_dir(out, "resnet18_dataloader")
    if device == "cuda":
        batch, image_size = 32, 112
    else:
        batch, image_size = 8, 64
    num_classes = 1000
    wait, warmup, active, repeat = 1, 1, 3, 2
    steps = (wait + warmup + active) * repeat

    torch.manual_seed(0)
    model = _resnet18(num_classes, device).to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(
        SyntheticImages(steps * batch, image_size, num_classes),
        batch_size=batch,
        shuffle=False,
        num_workers=2,
        pin_memory=(device == "cuda"),
        drop_last=True,
    )

    with profile(
        activities=_activities(device),
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=tensorboard_trace_handler(path, worker_name=WORKER_NAME, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_modules=True,
    ) as prof:
        for step, (images, labels) in enumerate(loader):
            if step >= steps:
                break
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()
    _sync(device)


# --------------------------------------------------------------------------- tiny GPT, bf16


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d_model: int, n_layers: int, n_heads: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        for b in self.blocks:
            nn.init.normal_(b.attn.proj.weight, std=0.02 / math.sqrt(2 * n_layers))

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def run_gpt_tiny_bf16(out: str, device: str) -> None:
    path = _prepare_run_dir(out, "gpt_tiny_bf16")
    if device == "cuda":
        vocab, seq, batch, d_model, n_layers, n_heads = 8192, 256, 8, 256, 4, 4
    else:
        vocab, seq, batch, d_model, n_layers, n_heads = 2048, 64, 2, 128, 2, 4
    wait, warmup, active, repeat = 1, 1, 3, 1
    steps = (wait + warmup + active) * repeat

    torch.manual_seed(0)
    model = TinyGPT(vocab, seq, d_model, n_layers, n_heads).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    # Token batches live on the host, as a data pipeline would hand them over.
    data = torch.randint(0, vocab, (steps, batch, seq + 1))

    with profile(
        activities=_activities(device),
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=tensorboard_trace_handler(path, worker_name=WORKER_NAME, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=False,
    ) as prof:
        for step in range(steps):
            tokens = data[step].to(device, non_blocking=True)
            inputs, targets = tokens[:, :-1], tokens[:, 1:]
            with torch.autocast(device, dtype=torch.bfloat16):
                logits = model(inputs)
                loss = F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()
    _sync(device)


# --------------------------------------------------------------------------- main

RUNS = {
    "resnet18_dataloader": run_resnet18_dataloader,
    "gpt_tiny_bf16": run_gpt_tiny_bf16,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "logdir"),
                        help="logdir to write (one sub-folder per run); default: examples/logdir")
    parser.add_argument("--device", choices=["cuda", "cpu"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=list(RUNS),
                        help="which runs to (re)make; default: all")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")

    print(f"torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name(0)})" if args.device == "cuda" else ""))
    for name in args.runs:
        print(f"profiling {name} ...", flush=True)
        RUNS[name](args.out, args.device)
        for f in sorted(glob.glob(os.path.join(args.out, name, "*.pt.trace.json*"))):
            print(f"  {f}  {os.path.getsize(f)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
