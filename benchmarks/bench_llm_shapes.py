"""flashsplit's forward on the prefill shapes of language models, against its peers: causal,
d=128, bf16, GQA groups of 32, 64 and 40 query heads over 8 k/v heads (and 8 over 1), from 8 to
512 (batch x heads) tiles of work, odd lengths, and chunked prefill (a chunk of queries against
the cache before it and itself: sq < sk, bottom-right causal). Each shape is timed in one
interleaved measurement with SDPA cuDNN (only where sq == sk: its causal mask is top-left) and
FlashAttention-3 when installed.

    python benchmarks/bench_llm_shapes.py [--out DIR]
"""

import argparse
import os
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (b, h, hk, sq, sk): Llama-style 32/8, 64/8 and 40/8 groups at (batch x heads) 32 to 512 over
# odd lengths, one 8/1 group (8 tiles of heads), and chunked prefill.
SHAPES = [
    (1, 32, 8, 1000, 1000), (4, 32, 8, 2049, 2049), (16, 32, 8, 777, 777),
    (1, 32, 8, 4097, 4097), (1, 64, 8, 3000, 3000), (2, 64, 8, 8191, 8191),
    (1, 40, 8, 5000, 5000), (8, 40, 8, 1500, 1500), (1, 8, 1, 8192, 8192),
    (1, 32, 8, 512, 8192), (1, 64, 8, 2048, 16384), (4, 40, 8, 1024, 6000),
]
HEAD_DIM = 128
PEERS = ("sdpa_cudnn", "fa3")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None, help="directory for bench_llm_shapes.csv")
    return p.parse_args(argv)


def run_shape(torch, flashsplit, shape, args):
    """CSV rows of one shape: flashsplit and each peer (ms, TFLOPS, or why it did not run)."""
    b, h, hk, sq, sk = shape
    sets = T.make_input_sets(torch, b, h, hk, sq, sk, HEAD_DIM, torch.bfloat16)
    methods = OrderedDict(flashsplit=(T.flashsplit_runner(flashsplit, True, 0), ""))
    methods.update(T.peer_runners(torch, *sets[0], True, PEERS))
    runnable = [(name, fn) for name, (fn, _) in methods.items() if fn is not None]
    timings = T.time_cuda_interleaved(torch, [fn for _, fn in runnable], sets, args.warmup,
                                      args.reps)
    timed = dict(zip((name for name, _ in runnable), timings))
    flops = T.attention_flops(b, h, sq, sk, HEAD_DIM, True)
    rows = []
    for name, (_, reason) in methods.items():
        timing = timed.get(name)
        ms = timing["median_ms"] if timing else None
        rows.append(OrderedDict(b=b, h=h, hk=hk, sq=sq, sk=sk, d=HEAD_DIM, method=name, ms=ms,
                                p10_ms=timing["p10_ms"] if timing else None,
                                p90_ms=timing["p90_ms"] if timing else None,
                                tflops=T.tflops(flops, ms), note=reason))
    return rows


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_llm_shapes")
    flashsplit = T.import_flashsplit("bench_llm_shapes")
    rows, table = [], []
    for shape in SHAPES:
        shape_rows = run_shape(torch, flashsplit, shape, args)
        rows += shape_rows
        by_name = {r["method"]: r for r in shape_rows}
        fs_ms = by_name["flashsplit"]["ms"]
        cells = [",".join(map(str, shape)), f"{by_name['flashsplit']['tflops']:.0f}"]
        for peer in PEERS:
            peer_ms = by_name[peer]["ms"]
            cells.append(f"{peer_ms / fs_ms:.3f}" if peer_ms else "n/a")
        table.append(cells)
        torch.cuda.empty_cache()
    print(T.format_table(table, ["b,h,hk,sq,sk", "fs TFLOPS"] + [f"x{p}" for p in PEERS]))
    print("xPEER = PEER time / flashsplit time (> 1: flashsplit faster); n/a: the peer cannot "
          "run the shape (SDPA's causal mask is top-left, so chunked prefill is FA3's only)")
    T.write_results(args.out, "bench_llm_shapes.csv", rows)


if __name__ == "__main__":
    main()
