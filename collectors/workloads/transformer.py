"""`transformer`: a decoder-only language model trained with AdamW (fused on CUDA) on random
tokens, under bf16 autocast by default."""

from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.nn.functional as F

from ..models import Decoder
from .common import Options, autocast, profiled_run

SUMMARY = "a decoder-only transformer with AdamW, bf16 autocast"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--amp", choices=["none", "bf16"], default="bf16", help="bf16 autocast (default) or fp32")


def run(opts: Options, args: argparse.Namespace) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    vocab, context, dim, layers, heads, batch = ((8192, 512, 512, 6, 8, 16) if opts.cuda
                                                 else (512, 64, 64, 2, 4, 4))
    model = Decoder(vocab, context, dim, layers, heads).to(opts.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=opts.cuda)
    ids = torch.randint(vocab, (batch, context + 1), device=opts.device)

    def step() -> None:
        with autocast(opts, args.amp):
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    name = "transformer_adamw" + ("_bf16" if args.amp == "bf16" else "_fp32")
    return [profiled_run(opts, name, step, samples=batch, tokens=batch * context)]
