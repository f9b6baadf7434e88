"""Record a large, realistic trace: a Hugging Face Llama (random weights, built from a config)
trained with AdamW in bf16 on one CUDA GPU, profiled with stacks, shapes, memory and modules.

    python bench/record_llama.py OUT_LOGDIR [--layers 32] [--hidden 2048] [--seq 2048] [--steps 40]

Writes OUT_LOGDIR/llama_<layers>l/<worker>.<time>.pt.trace.json (plain JSON: the size is the
point). 32 layers and 40 steps gave about 1 GB and 3 M events on an H200 with torch 2.11; the
trace store's benchmarks (bench/load.py, bench/scale.py) open it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40, help="profiled steps (one trace file)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("record_llama.py needs a CUDA GPU", file=sys.stderr)
        return 2
    model = llama(args.layers, args.hidden, args.hidden // 128, args.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(model.config.vocab_size, (args.batch, args.seq), device="cuda")

    def step() -> None:
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    record(args.logdir, f"llama_{args.layers}l", step, args.steps)
    return 0


def llama(layers: int, hidden: int, kv_heads: int, positions: int) -> torch.nn.Module:
    """A Hugging Face Llama of that shape (heads of 128, a vocabulary of 32,000), random weights, in bf16
    on the GPU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=hidden, intermediate_size=int(hidden * 8 / 3) // 256 * 256,
                         num_hidden_layers=layers, num_attention_heads=hidden // 128, num_key_value_heads=kv_heads,
                         vocab_size=32000, max_position_embeddings=positions, attn_implementation="sdpa")
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to("cuda", dtype=torch.bfloat16)


def record(logdir: str, run: str, step: Callable[[], None], steps: int) -> None:
    """Profile `steps` calls of `step` (after the profiler's wait and warm-up steps) into one plain-JSON
    trace file under logdir/run, and say how big it came out."""
    from profboard.collectors import make_profiler

    prof = make_profiler(logdir, run, wait=1, warmup=1, active=steps, gzip=False)
    started = time.perf_counter()
    with prof:
        for _ in range(2 + steps):
            step()
            prof.step()
    torch.cuda.synchronize()
    for path in prof.profboard_traces:
        print(f"{path}: {path.stat().st_size / 2**20:.0f} MiB, recorded and written in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
