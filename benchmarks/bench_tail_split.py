#!/usr/bin/env python3
"""The tail split (core/tail_split.h) on and off, at bench_seqlen's points.

An unsplit Hopper call whose last round of tiles would leave SMs idle cuts that round into
key-block pieces spread over every SM. This times flashsplit at G = 1 with it (as shipped) and
with FLASHSPLIT_DISABLE_TAIL_SPLIT=1, and SDPA's cuDNN backend, interleaved (each repetition
runs all three once), and prints one line per point: TFLOPS, on / off, and both against cuDNN.
The order of the two flashsplit runners alternates between rounds.

    python benchmarks/bench_tail_split.py [--seqlens 1k,2k,4k,8k,16k] [--causal off|on|both]
                                          [--rounds 2]

Exit codes: 0 ok, 2 no CUDA device, 3 flashsplit not built with GPU kernels.
"""

from __future__ import annotations

import argparse
import os

import _timing as T

DISABLE = "FLASHSPLIT_DISABLE_TAIL_SPLIT"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seqlens", default="1k,2k,4k,8k,16k", help="comma list, k = 1024")
    p.add_argument("--tokens", type=int, default=16 * 1024, help="b = tokens / s (at least 1)")
    p.add_argument("--head-dims", default="128,64")
    p.add_argument("--hidden", type=int, default=2048, help="h = hidden / d heads")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--causal", choices=["off", "on", "both"], default="off")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args(argv)
    args.seqlens = T.parse_int_list(args.seqlens)
    args.head_dims = T.parse_int_list(args.head_dims)
    args.causal_values = {"off": [False], "on": [True], "both": [False, True]}[args.causal]
    return args


def tail_runners(flashsplit, causal):
    """G = 1 with the tail split as shipped, and with it turned off through the environment."""
    def tail_on(q, k, v):
        os.environ.pop(DISABLE, None)
        return flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=1)

    def tail_off(q, k, v):
        os.environ[DISABLE] = "1"
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=1)
        finally:
            os.environ.pop(DISABLE, None)

    return tail_on, tail_off


def measure_point(torch, flashsplit, args, dtype, rnd, causal, d, s):
    """One line: TFLOPS with the tail split on and off (and SDPA cuDNN), timed interleaved."""
    b, h = max(1, args.tokens // s), args.hidden // d
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dtype)
    q, k, v = sets[0]
    decision = T.explain(flashsplit, q, k, v, causal=causal, num_splits=1)
    cudnn, refusal = T.peer_runners(torch, q, k, v, causal=causal,
                                    peers=["sdpa_cudnn"])["sdpa_cudnn"]
    tail_on, tail_off = tail_runners(flashsplit, causal)
    ours = [tail_on, tail_off] if rnd % 2 == 0 else [tail_off, tail_on]
    fns = ours + ([cudnn] if cudnn is not None else [])
    times = T.time_cuda_interleaved(torch, fns, sets, warmup=3, reps=args.reps)
    ms = {fn: t["median_ms"] for fn, t in zip(fns, times)}
    flops = T.attention_flops(b, h, s, s, d, causal)
    on, off = ms[tail_on], ms[tail_off]
    line = (f"round {rnd} causal={int(causal)} b={b} h={h} s={s} d={d} "
            f"block_m={decision['block_m']} "
            f"tail {decision['tail_tiles']} tiles / {decision['tail_parts']} parts: "
            f"on {T.tflops(flops, on):.0f} off {T.tflops(flops, off):.0f}")
    if cudnn is not None:
        line += (f" cudnn {T.tflops(flops, ms[cudnn]):.0f} TFLOPS | on/off {off / on:.3f} "
                 f"x_cudnn on {ms[cudnn] / on:.3f} off {ms[cudnn] / off:.3f}")
    else:
        line += f" TFLOPS | on/off {off / on:.3f} (sdpa_cudnn n/a: {refusal})"
    return line


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_tail_split")
    flashsplit = T.import_flashsplit("bench_tail_split")
    dtype = T.parse_dtype(torch, args.dtype)
    for rnd in range(args.rounds):
        for causal in args.causal_values:
            for d in args.head_dims:
                for s in args.seqlens:
                    print(measure_point(torch, flashsplit, args, dtype, rnd, causal, d, s),
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
