"""No data-dependent slow paths: flashsplit's forward on adversarial inputs (scores rising or
falling along the keys, attention-sink rows; _timing.adversarial_qkv) against the same shapes
on random inputs, timed in one interleaved measurement per shape. Prints each kind's time over
the random one's (> 1.03 flags a slow path).

    python benchmarks/bench_adversarial.py [--out DIR]
"""

import argparse
import os
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (b, h, hk, sq, sk, d, causal): prefill on both kernel families' tiles, and split decode.
SHAPES = [
    (4, 16, 16, 4096, 4096, 128, True), (4, 16, 16, 4096, 4096, 128, False),
    (8, 32, 32, 2048, 2048, 64, True), (8, 32, 32, 2048, 2048, 64, False),
    (1, 16, 16, 8192, 8192, 128, True),
    (1, 32, 8, 1, 32768, 128, False), (8, 32, 8, 1, 8192, 64, False),
    (4, 21, 21, 4096, 4096, 96, True), (4, 21, 21, 4096, 4096, 96, False),
    (4, 10, 10, 4096, 4096, 192, True), (4, 8, 8, 4096, 4096, 256, False),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", default=None, help="directory for bench_adversarial.csv")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_adversarial")
    flashsplit = T.import_flashsplit("bench_adversarial")
    rows, table = [], []
    for shape in SHAPES:
        b, h, hk, sq, sk, d, causal = shape
        inputs = OrderedDict((kind, T.adversarial_qkv(torch, kind, b, h, hk, sq, sk, d,
                                                      torch.bfloat16))
                             for kind in T.ADVERSARIAL_KINDS)
        fns = [(lambda qkv=qkv: flashsplit.flash_attn_func(*qkv, causal=causal))
               for qkv in inputs.values()]
        timings = T.time_cuda_interleaved(torch, fns, [()], args.warmup, args.reps)
        base = timings[0]["median_ms"]
        cells = [",".join(map(str, shape)), f"{base * 1e3:.1f}"]
        for kind, timing in zip(inputs, timings):
            rows.append(OrderedDict(shape=",".join(map(str, shape)), kind=kind,
                                    ms=timing["median_ms"], p10_ms=timing["p10_ms"],
                                    p90_ms=timing["p90_ms"], vs_random=timing["median_ms"] / base))
            if kind != "random":
                cells.append(f"{timing['median_ms'] / base:.3f}")
        table.append(cells)
        del inputs
        torch.cuda.empty_cache()
    print(T.format_table(table, ["b,h,hk,sq,sk,d,causal", "random us"] +
                         [f"{k}/random" for k in T.ADVERSARIAL_KINDS[1:]]))
    worst = max(r["vs_random"] for r in rows)
    print(f"worst adversarial/random time: {worst:.3f}"
          f"{' (over 1.03: a data-dependent slow path)' if worst > 1.03 else ''}")
    T.write_results(args.out, "bench_adversarial.csv", rows)


if __name__ == "__main__":
    main()
