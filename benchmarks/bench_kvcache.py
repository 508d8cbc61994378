"""Decode against a kv cache: flashsplit's flash_attn_with_kvcache (contiguous and paged caches)
next to FlashAttention-3's flash_attn_with_kvcache (when installed) and SDPA cuDNN on the same
keys, GPU time per call and the HBM bandwidth it reaches.

Every method of a shape is timed in one interleaved measurement (benchmarks/_timing.py: CUDA
events, the L2 written between calls by rotating input sets, orders rotated). Bandwidth counts
the bytes a call must move: the cache's used keys and values, q and out.

    python benchmarks/bench_kvcache.py [--shape b,sq,h,hk,s_cache,d ...] [--pages 16,64,256]
                                       [--grid N [--seed S]] [--shuffle-run PAGES] [--out DIR]

--grid N draws N decode shapes from the range flashsplit is measured over (GRID_RANGE: batch
1-64, k/v heads 1-8, query heads per k/v head 1-16, caches of 2k-512k keys, d = 64 and 128)
and ends with each peer's ratio over the whole draw; the same seed draws the same shapes.

Paged caches hold the keys in shuffled pages, as a cache allocator's free list hands them out;
--shuffle-run N shuffles them only within runs of N neighbouring pages of the pool (an
allocator that keeps a sequence's pages near each other), 0 over the whole pool.
"""

import argparse
import math
import os
import random
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _timing as T  # noqa: E402

# (b, sq, h, hk, s_cache, d): decode over batch, grouping, cache length and head dim.
DEFAULT_SHAPES = [
    (1, 1, 8, 8, 2048, 128), (1, 1, 32, 8, 32768, 128), (1, 1, 64, 8, 524288, 128),
    (1, 1, 16, 1, 131072, 128), (8, 1, 32, 8, 8192, 128), (8, 1, 8, 8, 32768, 64),
    (16, 1, 128, 8, 16384, 128), (64, 1, 32, 8, 2048, 128), (64, 1, 64, 8, 8192, 128),
    (64, 1, 16, 16, 4096, 64), (32, 1, 32, 4, 32768, 128), (4, 1, 16, 16, 65536, 64),
    (8, 1, 32, 8, 8192, 64), (4, 1, 32, 8, 131072, 128), (18, 1, 32, 8, 4096, 64),
    (20, 1, 32, 8, 4096, 128),
]


# The decode range --grid draws from: (lowest, highest) batch, k/v heads, query heads per k/v
# head and cache length, and the head dims; caches past GRID_MAX_CACHE_BYTES (k and v) are
# drawn again, so the draw leans to shorter caches at large batches.
GRID_RANGE = dict(b=(1, 64), hk=(1, 8), group=(1, 16), s_cache=(2048, 524288), d=(64, 128))
GRID_MAX_CACHE_BYTES = 2 << 30


def grid_shapes(count, seed):
    """count decode shapes drawn from GRID_RANGE: batch, k/v heads and group uniform, the cache
    length log-uniform (any length, not only powers of two), the head dim either."""
    rng = random.Random(seed)
    r = GRID_RANGE
    shapes = []
    while len(shapes) < count:
        b, hk, group = (rng.randint(*r[name]) for name in ("b", "hk", "group"))
        s = round(math.exp(rng.uniform(*map(math.log, r["s_cache"]))))
        d = rng.choice(r["d"])
        if 2 * b * s * hk * d * 2 <= GRID_MAX_CACHE_BYTES:
            shapes.append((b, 1, hk * group, hk, s, d))
    return shapes


def parse_shape(text):
    return T.parse_shape(text, "b,sq,h,hk,s_cache,d")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=parse_shape, action="append",
                   help="b,sq,h,hk,s_cache,d (repeatable; default: a decode grid)")
    p.add_argument("--grid", type=int, default=0,
                   help="draw this many decode shapes from GRID_RANGE instead of the defaults")
    p.add_argument("--seed", type=int, default=0, help="the --grid draw's seed")
    p.add_argument("--pages", default="16,64,256", help="page sizes of the paged runs")
    p.add_argument("--shuffle-run", type=int, default=0,
                   help="shuffle pages only within runs of this many (0: the whole pool)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", default=None, help="directory for bench_kvcache.csv")
    args = p.parse_args(argv)
    if args.grid < 0:
        p.error(f"--grid must be >= 0, got {args.grid}")
    if args.grid and args.shape:
        p.error("--grid draws its own shapes; give it or --shape, not both")
    args.shapes = args.shape or (grid_shapes(args.grid, args.seed) if args.grid else DEFAULT_SHAPES)
    args.page_sizes = T.parse_int_list(args.pages)
    if args.shuffle_run < 0:
        p.error(f"--shuffle-run must be >= 0, got {args.shuffle_run}")
    return args


def page_order(torch, pages, run, gen):
    """Where each page goes: a shuffle of the pool, or within each run of `run` pages."""
    if run <= 0 or run >= pages:
        return torch.randperm(pages, generator=gen)
    return torch.cat([first + torch.randperm(min(run, pages - first), generator=gen)
                      for first in range(0, pages, run)])


def paged(torch, k, v, page_size, gen, run=0):
    """k and v (b, s, hk, d) as the same shuffled pages (pages, page_size, hk, d) each (shuffled
    within runs of `run` pages, 0: over the pool), and the block table."""
    b, s = k.shape[:2]
    per_seq = math.ceil(s / page_size)
    order = page_order(torch, b * per_seq, run, gen).to("cuda")

    def scatter(cache):
        padded = torch.nn.functional.pad(cache, (0, 0, 0, 0, 0, per_seq * page_size - s))
        pages = torch.empty((b * per_seq, page_size) + tuple(cache.shape[2:]),
                            dtype=cache.dtype, device="cuda")
        pages[order] = padded.reshape((b * per_seq, page_size) + tuple(cache.shape[2:]))
        return pages

    return scatter(k), scatter(v), order.view(b, per_seq).to(torch.int32)


def methods(torch, flashsplit, shape, sets, page_sizes, shuffle_run=0):
    """name -> runner(q, k, v, extra) and the per-set extras the runners take."""
    b, sq, h, hk, s, d = shape
    lens = torch.full((b,), s, dtype=torch.int32, device="cuda")
    causal = sq > 1
    runners = OrderedDict()
    runners["flashsplit"] = lambda q, k, v, x: flashsplit.flash_attn_with_kvcache(
        q, k, v, cache_seqlens=lens, causal=causal)
    gen = torch.Generator().manual_seed(0)
    extras = [dict() for _ in sets]
    for page in page_sizes:
        for (q, k, v), extra in zip(sets, extras):
            extra[page] = paged(torch, k, v, page, gen, shuffle_run)
        runners[f"flashsplit_page{page}"] = (
            lambda q, k, v, x, page=page: flashsplit.flash_attn_with_kvcache(
                q, x[page][0], x[page][1], cache_seqlens=lens, block_table=x[page][2],
                causal=causal))
    fa3 = T.fa3_module()
    if fa3 is not None and hasattr(fa3, "flash_attn_with_kvcache"):
        runners["fa3"] = lambda q, k, v, x: fa3.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lens, causal=causal)
    for name, (run, _reason) in T.peer_runners(torch, *sets[0], causal, ["sdpa_cudnn"]).items():
        if run is not None:
            runners[name] = lambda q, k, v, x, run=run: run(q, k, v)
    return runners, extras


def run_shape(torch, flashsplit, args, shape, rows):
    b, sq, h, hk, s, d = shape
    # Every call reads its k/v from HBM. FA3, SDPA and the contiguous flashsplit call share each
    # set's cache, so with fewer sets than fill twice the L2 one of them can find in L2 the cache
    # another has just read; and at least two sets, so that two calls in a row never read the
    # same cache however large.
    sets = T.make_input_sets(torch, b, h, hk, sq, s, d, torch.bfloat16, max_sets=16, min_sets=2)
    runners, extras = methods(torch, flashsplit, shape, sets, args.page_sizes, args.shuffle_run)
    arg_sets = [(q, k, v, x) for (q, k, v), x in zip(sets, extras)]
    io = T.attention_io_bytes(b, h, hk, sq, s, d, 2)
    timed, contiguous = [], None
    for name, runner in runners.items():
        row = OrderedDict(shape=",".join(map(str, shape)), method=name, ms=None, status="ok")
        try:
            out = runner(*arg_sets[0])
            if name == "flashsplit":
                contiguous = out.float()
            elif name.startswith("flashsplit_page") and not torch.allclose(
                    out.float(), contiguous, atol=2e-2, rtol=0):
                raise RuntimeError("the paged cache's output differs from the contiguous one's")
            timed.append((row, runner))
        except Exception as exc:  # noqa: BLE001 - report, never crash the sweep
            row.update(status="error", note=T.short_reason(str(exc)))
        rows.append(row)
    T.time_rows_interleaved(torch, timed, arg_sets, args.warmup, args.reps,
                            max_seconds=4.0 * len(timed))
    for row, _ in timed:
        row["tb_per_s"] = io / (row["ms"] * 1e-3) / 1e12
    del sets, extras, arg_sets
    torch.cuda.empty_cache()
    return {row["method"]: row for row, _ in timed}


def ratio_summary(ratios):
    """One line per peer: its time over flashsplit's across the shapes (geomean, the lowest and
    highest with their shapes) and how many shapes flashsplit is behind on (paged: past 1.10)."""
    lines = []
    for name, pairs in ratios.items():
        if not pairs:
            continue
        values = [r for r, _ in pairs]
        geomean = math.exp(sum(map(math.log, values)) / len(values))
        low, high = min(pairs), max(pairs)
        paged = name.startswith("page")
        behind = sum(r > 1.10 for r in values) if paged else sum(r < 1.0 for r in values)
        lines.append(f"{name}: geomean {geomean:.3f}, lowest {low[0]:.3f} at ({low[1]}), "
                     f"highest {high[0]:.3f} at ({high[1]}); "
                     f"{'past 1.10' if paged else 'below 1.0'} on {behind} of {len(values)}")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    torch = T.require_cuda("bench_kvcache")
    flashsplit = T.import_flashsplit("bench_kvcache")
    peers = ["fa3", "sdpa_cudnn"] + [f"flashsplit_page{p}" for p in args.page_sizes]
    header = ["b,sq,h,hk,s,d", "fs us", "fs TB/s", "fa3/fs", "cudnn/fs"] + \
        [f"page{p}/fs" for p in args.page_sizes]
    ratios = OrderedDict((name, []) for name in header[3:])
    rows, table = [], []
    for shape in args.shapes:
        T.progress(f"bench_kvcache: {shape}")
        result = run_shape(torch, flashsplit, args, shape, rows)
        fs = result.get("flashsplit")
        label = ",".join(map(str, shape))
        cells = [label, T.fmt(fs and fs["ms"] * 1e3, 4), T.fmt(fs and fs["tb_per_s"], 3)]
        for other, column in zip(peers, header[3:]):
            peer = result.get(other)
            ratio = peer["ms"] / fs["ms"] if peer and fs else None
            cells.append(T.fmt(ratio, 3) if ratio else "n/a")
            if ratio:
                ratios[column].append((ratio, label))
        table.append(cells)
    print(T.format_table(table, header))
    print("x/fs: the other method's time over flashsplit's contiguous-cache time "
          "(> 1: flashsplit is faster; page columns: paged flashsplit, < 1.10 is within 10%)")
    if len(args.shapes) > 1:
        print(ratio_summary(ratios))
    T.write_results(args.out, "bench_kvcache.csv", rows)


if __name__ == "__main__":
    main()
