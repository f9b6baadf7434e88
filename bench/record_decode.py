"""Record a large trace of a third shape: token-by-token decoding (inference) of a Hugging Face Llama
(random weights, built from a config) in bf16 on one CUDA GPU, each generated token a profiler step,
profiled with stacks, shapes, memory and modules. Decoding launches many small kernels from short
operators, thousands of steps in one file: more events per byte and more steps than the training
traces of record_llama.py and record_compiled.py, so the trace store's benchmarks (bench/store.py)
meet a trace they were not tuned on.

    python bench/record_decode.py OUT_LOGDIR [--layers 16] [--hidden 2048] [--batch 8] [--steps 2000]

Writes OUT_LOGDIR/llama_decode_<layers>l/<worker>.<time>.pt.trace.json (plain JSON: the size is the point).
"""

from __future__ import annotations

import argparse
import sys

import torch
from record_llama import llama, record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens, prefilled before profiling")
    parser.add_argument("--steps", type=int, default=2000, help="profiled steps, one generated token each")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("record_decode.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from transformers import DynamicCache

    # Grouped-query attention (a quarter as many key-value heads as heads), as in today's Llamas.
    model = llama(args.layers, args.hidden, args.hidden // 512, args.prompt + args.steps + 8).eval()
    cache = DynamicCache()
    prompt = torch.randint(model.config.vocab_size, (args.batch, args.prompt), device="cuda")
    state = {}

    @torch.inference_mode()
    def step() -> None:
        # Greedy decoding of one token per sequence, its logits reduced on the GPU.
        logits = model(input_ids=state["next"], past_key_values=cache, use_cache=True).logits
        state["next"] = logits[:, -1:].argmax(-1)

    with torch.inference_mode():
        state["next"] = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
    torch.cuda.synchronize()
    record(args.logdir, f"llama_decode_{args.layers}l", step, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
