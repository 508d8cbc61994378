"""Host time per call: what a decode step without CUDA graphs pays on the CPU for each attention
call, next to a plain SDPA call on the same CUDA tensors (`sdpa`; `sdpa_cudnn` and `sdpa_flash`
pin their backend with a context manager, as the other benchmarks do) and FA3 when installed.

For each shape and function: warm-up calls, then rounds of `--calls` back-to-back calls with the
GPU idle at the start. `host_us` is the wall time per call to enqueue them (the Python, C++ and
launch work; the GPU runs behind), `step_us` the wall time per call until the GPU finished them
too. Functions are interleaved round by round, in an order that rotates; the median over rounds
is reported with its min-max spread.

    python benchmarks/bench_overhead.py [--rounds 15] [--calls 50] [--out DIR]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (label, b, sq, h, hk, sk, d): decode steps, a multi-token decode and a short prefill.
SHAPES = [
    ("decode", 1, 1, 32, 8, 4096, 128),
    ("decode", 8, 1, 32, 8, 8192, 128),
    ("decode", 64, 1, 32, 8, 2048, 128),
    ("decode", 4, 1, 16, 16, 16384, 64),
    ("spec-decode", 8, 8, 32, 8, 16384, 128),
    ("prefill", 1, 1500, 32, 8, 1500, 128),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=50, help="back-to-back calls per round")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", default=None, help="directory for bench_overhead.csv")
    return p.parse_args(argv)


def runners(torch, flashsplit, shape):
    """name -> zero-argument callable for one shape (peers that cannot run it are left out)."""
    _, b, sq, h, hk, sk, d = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    lens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
    causal = sq > 1
    result = {
        "flashsplit": lambda: flashsplit.flash_attn_func(q, k, v, causal=causal),
        "flashsplit_kvcache": lambda: flashsplit.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lens, causal=causal),
    }
    if sq == 1 or sq == sk:
        # The plain call, without the backend-pinning context manager the other SDPA runners
        # enter (which costs about as much again): the host time to match.
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        result["sdpa"] = lambda: torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, is_causal=causal, enable_gqa=h != hk)
    for name, (run, _reason) in T.peer_runners(torch, q, k, v, causal,
                                               ["sdpa_cudnn", "sdpa_flash", "fa3"]).items():
        if run is not None:
            result[name] = (lambda run=run: run(q, k, v))
    fa3 = T.fa3_module()
    if fa3 is not None and hasattr(fa3, "flash_attn_with_kvcache"):
        result["fa3_kvcache"] = lambda: fa3.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lens, causal=causal)
    return result


def time_round(torch, fn, calls):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6


def measure(torch, fns, args):
    for fn in fns.values():
        for _ in range(args.warmup):
            fn()
    names = list(fns)
    host = {n: [] for n in names}
    step = {n: [] for n in names}
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            h, s = time_round(torch, fns[n], args.calls)
            host[n].append(h)
            step[n].append(s)
    return host, step


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_overhead")
    flashsplit = T.import_flashsplit("bench_overhead")
    rows = []
    print(f"{'shape':<34} {'function':<20} {'host_us':>9} {'(min-max)':>15} {'step_us':>9}")
    for shape in SHAPES:
        fns = runners(torch, flashsplit, shape)
        host, step = measure(torch, fns, args)
        label = "{} b={} sq={} h={} hk={} sk={} d={}".format(*shape)
        for name in fns:
            row = dict(shape=label, function=name, host_us=statistics.median(host[name]),
                       host_min=min(host[name]), host_max=max(host[name]),
                       step_us=statistics.median(step[name]))
            rows.append(row)
            print(f"{label:<34} {name:<20} {row['host_us']:9.1f} "
                  f"({row['host_min']:6.1f}-{row['host_max']:6.1f}) {row['step_us']:9.1f}")
    T.write_results(args.out, "bench_overhead.csv", rows)


if __name__ == "__main__":
    main()
