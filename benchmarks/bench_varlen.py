"""Varlen prefill against the dense kernel on the same rows, and against FlashAttention-3's varlen
forward: each shape's b sequences of s tokens are timed as one dense call (b, s, h, d) and as
one varlen call over the same rows packed (b * s, h, d) with equal cu_seqlens, in one
interleaved measurement; then, where FA3 is installed, its varlen call on the same packed rows.
A second row per shape gives the sequences unequal lengths (s / 2 to 3 s / 2, the same tokens in
all) and compares flashsplit's varlen call with FA3's only (a batch of one sequence has no such
row: one prompt's prefill, as a serving engine's varlen call makes it).

    python benchmarks/bench_varlen.py [--shape b,s,h,hk,d ...] [--out DIR]
"""

import argparse
import os
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (b, s, h, hk, d): GQA and MHA prefill batches, an odd length, short and long sequences, and
# one long prompt.
SHAPES = [
    (4, 2048, 32, 8, 128), (2, 4096, 32, 8, 128), (16, 512, 32, 8, 128), (8, 777, 32, 8, 128),
    (8, 1024, 16, 16, 64), (4, 3000, 16, 16, 64), (2, 8192, 16, 16, 64), (1, 16384, 32, 8, 128),
]


def parse_shape(text):
    shape = T.parse_shape(text, "b,s,h,hk,d")
    if min(shape) < 1 or shape[2] % shape[3]:
        raise argparse.ArgumentTypeError(
            f"--shape wants positive values and hk dividing h, got {text!r}")
    return shape


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", action="append", type=parse_shape, default=None,
                   help="b,s,h,hk,d (repeatable; default: the shapes above)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--causal", default="0,1", help="causal settings to run: 0, 1 or 0,1")
    p.add_argument("--out", default=None, help="directory for bench_varlen.csv")
    return p.parse_args(argv)


def unequal_lengths(b, s):
    """b lengths from s / 2 to 3 s / 2 that sum to b * s (the same tokens as the equal batch)."""
    if b == 1:
        return [s]
    lengths = [s // 2 + (s * i) // (b - 1) for i in range(b)]
    lengths[-1] += b * s - sum(lengths)
    return lengths


def cu_seqlens(torch, lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device="cuda")


def varlen_runners(torch, flashsplit, lengths, causal):
    """name -> runner of (q, k, v) in the dense layout, called on its packed rows."""
    cu = cu_seqlens(torch, lengths)
    longest = max(lengths)

    def packed(t):
        return t.reshape(-1, t.shape[2], t.shape[3])

    def fs(q, k, v):
        return flashsplit.flash_attn_varlen_func(packed(q), packed(k), packed(v), cu, cu,
                                                 longest, longest, causal=causal)
    runners = OrderedDict(flashsplit_varlen=(fs, ""))
    fa3 = T.fa3_module()
    if fa3 is None:
        runners["fa3_varlen"] = (None, "not installed")
    else:
        def fa3_run(q, k, v):
            return T.first_output(fa3.flash_attn_varlen_func(
                packed(q), packed(k), packed(v), cu, cu, longest, longest, causal=causal))
        runners["fa3_varlen"] = (fa3_run, "")
    return runners


def timed_rows(torch, shape, causal, lengths, methods, sets, args):
    runnable = [(name, fn) for name, (fn, _) in methods.items() if fn is not None]
    timings = T.time_cuda_interleaved(torch, [fn for _, fn in runnable], sets, args.warmup,
                                      args.reps)
    timed = dict(zip((name for name, _ in runnable), timings))
    b, s, h, hk, d = shape
    flops = sum(T.attention_flops(1, h, n, n, d, causal) for n in lengths)
    rows = []
    for name, (_, reason) in methods.items():
        timing = timed.get(name)
        ms = timing["median_ms"] if timing else None
        rows.append(OrderedDict(b=b, s=s, h=h, hk=hk, d=d, causal=int(causal),
                                lengths="equal" if len(set(lengths)) == 1 else "unequal",
                                method=name, ms=ms,
                                p10_ms=timing["p10_ms"] if timing else None,
                                p90_ms=timing["p90_ms"] if timing else None,
                                tflops=T.tflops(flops, ms), note=reason))
    return rows


def run_shape(torch, flashsplit, shape, causal, args):
    b, s, h, hk, d = shape
    sets = T.make_input_sets(torch, b, h, hk, s, s, d, torch.bfloat16)
    equal = [s] * b
    methods = OrderedDict(flashsplit_dense=(T.flashsplit_runner(flashsplit, causal, 0), ""))
    methods.update(varlen_runners(torch, flashsplit, equal, causal))
    rows = timed_rows(torch, shape, causal, equal, methods, sets, args)
    if b > 1:
        unequal = unequal_lengths(b, s)
        rows += timed_rows(torch, shape, causal, unequal,
                           varlen_runners(torch, flashsplit, unequal, causal), sets, args)
    return rows


def ratio(by_name, slower, faster):
    a, b = by_name.get(slower), by_name.get(faster)
    return f"{a / b:.3f}" if a and b else "n/a"


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_varlen")
    flashsplit = T.import_flashsplit("bench_varlen")
    rows, table = [], []
    for shape in args.shape or SHAPES:
        for causal in (c == "1" for c in args.causal.split(",")):
            shape_rows = run_shape(torch, flashsplit, shape, causal, args)
            rows += shape_rows
            eq = {r["method"]: r["ms"] for r in shape_rows if r["lengths"] == "equal"}
            uneq = {r["method"]: r["ms"] for r in shape_rows if r["lengths"] == "unequal"}
            table.append([",".join(map(str, shape)), str(int(causal)),
                          f"{eq['flashsplit_dense']:.3f}", f"{eq['flashsplit_varlen']:.3f}",
                          ratio(eq, "flashsplit_varlen", "flashsplit_dense"),
                          ratio(eq, "fa3_varlen", "flashsplit_varlen"),
                          ratio(uneq, "fa3_varlen", "flashsplit_varlen")])
            torch.cuda.empty_cache()
    print(T.format_table(table, ["b,s,h,hk,d", "causal", "dense ms", "varlen ms",
                                 "varlen/dense", "xfa3 equal", "xfa3 unequal"]))
    print("varlen/dense: flashsplit's varlen time over its dense time on the same rows (1.0: "
          "no cost for the packing); xfa3: FA3's varlen time / flashsplit's (> 1: flashsplit "
          "faster), on equal lengths and on lengths from s/2 to 3s/2")
    T.write_results(args.out, "bench_varlen.csv", rows)


if __name__ == "__main__":
    main()
