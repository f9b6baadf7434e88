"""Record a large trace of another shape than record_llama.py's: a Hugging Face GPT-2 (random weights,
built from a config) compiled with torch.compile and trained with AdamW under bf16 autocast on one CUDA
GPU, profiled with stacks, shapes, memory and modules. Compiled code makes other events than eager code
(Triton kernels, compiled-graph regions, fewer and fused operators), so the trace store's benchmarks
(bench/store.py) meet a trace they were not tuned on.

    python bench/record_compiled.py OUT_LOGDIR [--layers 24] [--hidden 1536] [--seq 1024] [--steps 60]

Writes OUT_LOGDIR/gpt2_compiled_<layers>l/<worker>.<time>.pt.trace.json (plain JSON: the size is the point).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from record_llama import record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1536)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60, help="profiled steps (one trace file)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("record_compiled.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=args.hidden, n_layer=args.layers, n_head=args.hidden // 64, n_positions=args.seq,
                        vocab_size=50304)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    compiled = torch.compile(model)
    tokens = torch.randint(config.vocab_size, (args.batch, args.seq), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = compiled(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    started = time.perf_counter()
    for _ in range(3):  # compiles forward and backward
        step()
    torch.cuda.synchronize()
    print(f"compiled and warmed up in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    record(args.logdir, f"gpt2_compiled_{args.layers}l", step, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
