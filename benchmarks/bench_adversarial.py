"""No data-dependent slow paths: flashsplit's forward on adversarial inputs (scores rising or
falling along the keys, attention-sink rows; _timing.adversarial_qkv) against the same shapes
on random inputs, timed interleaved. Prints each kind's time over the random one's (> 1.03
flags a slow path).

Where a tensor lies in memory moves a memory-bound call's time too: a decode call of 55 us read
up to 1.7% apart on two allocations of the same random values. So each kind's inputs are copied
into several allocations (--copies) that the repetitions rotate through, and a shape's ratios
are the median over --runs interleaved measurements: what is left to differ is the data.

    python benchmarks/bench_adversarial.py [--out DIR]
"""

import argparse
import os
import statistics
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (b, h, hk, sq, sk, d, causal): prefill on both kernel families' tiles, and split decode.
SHAPES = [
    (4, 16, 16, 4096, 4096, 128, True), (4, 16, 16, 4096, 4096, 128, False),
    (8, 32, 32, 2048, 2048, 64, True), (8, 32, 32, 2048, 2048, 64, False),
    (1, 16, 16, 8192, 8192, 128, True),
    (8, 32, 8, 1280, 1280, 128, True), (2, 16, 16, 2560, 2560, 128, True),
    (1, 32, 8, 1, 32768, 128, False), (8, 32, 8, 1, 8192, 64, False),
    (4, 21, 21, 4096, 4096, 96, True), (4, 21, 21, 4096, 4096, 96, False),
    (4, 10, 10, 4096, 4096, 192, True), (4, 8, 8, 4096, 4096, 256, False),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--copies", type=int, default=4,
                   help="allocations of each kind's inputs the repetitions rotate through")
    p.add_argument("--runs", type=int, default=3,
                   help="interleaved measurements per shape; the ratios are their median")
    p.add_argument("--out", default=None, help="directory for bench_adversarial.csv")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_adversarial")
    flashsplit = T.import_flashsplit("bench_adversarial")
    rows, table = [], []
    for shape in SHAPES:
        b, h, hk, sq, sk, d, causal = shape
        inputs = OrderedDict()
        for kind in T.ADVERSARIAL_KINDS:
            qkv = T.adversarial_qkv(torch, kind, b, h, hk, sq, sk, d, torch.bfloat16)
            inputs[kind] = [qkv] + [tuple(x.clone() for x in qkv) for _ in range(args.copies - 1)]
        # Call i of a kind reads copy i mod --copies: every kind rotates through its allocations.
        fns = [(lambda copy, kind=kind: flashsplit.flash_attn_func(*inputs[kind][copy],
                                                                   causal=causal))
               for kind in inputs]
        copies = [(c,) for c in range(args.copies)]
        runs = [T.time_cuda_interleaved(torch, fns, copies, args.warmup, args.reps)
                for _ in range(args.runs)]
        ms = [statistics.median(run[f]["median_ms"] for run in runs) for f in range(len(fns))]
        cells = [",".join(map(str, shape)), f"{ms[0] * 1e3:.1f}"]
        for f, kind in enumerate(inputs):
            each_run = [run[f]["median_ms"] / run[0]["median_ms"] for run in runs]
            ratio = statistics.median(each_run)
            rows.append(OrderedDict(shape=",".join(map(str, shape)), kind=kind, ms=ms[f],
                                    vs_random=ratio,
                                    vs_random_runs=" ".join(f"{x:.3f}" for x in each_run)))
            if kind != "random":
                cells.append(f"{ratio:.3f}")
        table.append(cells)
        del inputs, fns
        torch.cuda.empty_cache()
    print(T.format_table(table, ["b,h,hk,sq,sk,d,causal", "random us"] +
                         [f"{k}/random" for k in T.ADVERSARIAL_KINDS[1:]]))
    worst = max(r["vs_random"] for r in rows)
    print(f"worst adversarial/random time: {worst:.3f}"
          f"{' (over 1.03: a data-dependent slow path)' if worst > 1.03 else ''}")
    T.write_results(args.out, "bench_adversarial.csv", rows)


if __name__ == "__main__":
    main()
