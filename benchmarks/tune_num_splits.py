#!/usr/bin/env python3
"""Measure every eligible split count G over a grid of shapes and fit the split heuristic.

Measure mode (needs a GPU):
    python benchmarks/tune_num_splits.py --budget-seconds 300 --out tune_out
  samples shapes from the grid (b in {1,2,4,8}; (h, hk) in {(16,16), (32,8), (8,1)};
  sq in {1,16,64,128,256,512,1024,4096}; sk in 512..131072; d in {64,128}; causal and not)
  in a seeded random order until the budget is spent, times every candidate G for each
  (interleaved: each repetition runs every G once, so drift during a shape's measurement falls
  on all of its G alike), and appends one CSV row per (shape, G) as it goes (a killed run keeps
  what it measured).
  --decode-grid N measures N decode shapes of bench_kvcache's --grid draw instead (batch 1-64,
  k/v heads 1-8, groups 1-16, caches of 2k-512k keys, d 64/128): grids of up to 512 one-warp
  blocks, which GRID's batches of at most 8 do not reach.

Evaluate mode (any machine where the extension is built, GPU kernels or not):
    python benchmarks/tune_num_splits.py --evaluate RAW_CSV [--search]
  scores the G that flashsplit.explain recorded at measurement time, and the G the C++
  heuristic gives with the constants of the command line (each SplitHeuristicConstants field is
  a flag, e.g. --combine-us 4; the defaults are the C++ ones). Every modelled time and G comes
  from flashsplit._C.heuristic, the functions the plan itself calls, so the model is the
  product's: resolve_splits_for on the kernel family that ran (the row's "kernel"; CSVs older
  than that column ran the portable kernels), the shape, and a device of the row's SM count
  and HBM bandwidth (rows without it: unknown). The constants of the command line stand in for
  the device's own: for a GPU whose SMs get more bandwidth than the H100's, pass the narrow
  slots nvidia_constants gives it (--slots-per-sm-narrow 3 on the H200).
  --search tunes the constants by coordinate descent and prints the ones to put back into
  csrc/core/split_heuristic.h; --exclude-shapes-in OTHER_CSV scores only the shapes another CSV
  lacks (a held-out check of constants fitted on it).

Raw CSV, one row per (shape, G): the shape (b, h, hk, sq, sk, d, causal, dtype), sms, the kernel
family and the tiles of the call at num_splits = 0 as explain reported them (block_m, block_n,
blocks_per_sm; grid_blocks, thread blocks per split), key_blocks (of the split calls' tiles,
which clamp a requested G), heuristic_g (explain's G), requested_g, g (the G that ran), the
median, p10 and p90 times in ms, a status, the HBM's peak bandwidth (dram_bytes_per_us), and
key_warps (the warps of a narrow block at num_splits = 0). A call left to the heuristic that runs
key warps (more than one) is not any requested G's (those run one-warp blocks), so it is timed
too, in the same interleaved measurement, as a row of requested_g 0.

benchmarks/data/ holds the H100 datasets the shipped constants were fitted on and checked
against (docs/design.md, "The split heuristic"): h100_iteration_fit.csv (the per-iteration
times; its G were timed one after another, the others interleaved), h100_prefill_fit.csv,
h100_decode_fit.csv, h100_prefill_validation_1.csv and h100_prefill_validation_2.csv; and
H200 decode sets of --decode-grid, h200_decode_grid_fit.csv and h200_decode_grid_validation.csv
(score them with --slots-per-sm-narrow 3).

Report: per shape, regret = time at the chosen G / best measured time over the requested G; the
geometric mean and the worst shapes; and, on grids that already fill the GPU (the row's
grid_blocks >= SMs * its blocks_per_sm), how often the choice is > 2 % slower than G = 1. The
recorded choice of a shape with a requested_g 0 row is that call's time (key warps; a regret
under 1 is a call faster than every split).

Exit codes: 0 ok, 1 no such --evaluate file, 2 no CUDA device (measure mode), 3 flashsplit not
built (or, to measure, built without GPU kernels).
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import math
import os
import random
import sys
import time
from collections import OrderedDict

import _timing as T

GRID = OrderedDict(
    b=[1, 2, 4, 8],
    heads=[(16, 16), (32, 8), (8, 1)],
    sq=[1, 16, 64, 128, 256, 512, 1024, 4096],
    sk=[512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
    d=[64, 128],
    causal=[False, True],
)
CANDIDATE_SPLITS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64,
                    80, 96, 112, 128, 160, 192, 256]
RAW_FIELDS = ["b", "h", "hk", "sq", "sk", "d", "causal", "dtype", "sms", "kernel", "block_m",
              "block_n", "blocks_per_sm", "key_blocks", "grid_blocks", "heuristic_g",
              "requested_g", "g", "ms", "p10_ms", "p90_ms", "status", "dram_bytes_per_us",
              "key_warps"]
AUTO = 0  # requested_g of the row timing the call left to the heuristic (key warps)
SLOWER_THAN_G1 = 1.02  # "more than 2 % slower than no split"
PORTABLE = "portable_mma"  # the family of rows measured before the kernel column existed
SPLIT_HEURISTIC_H = "csrc/core/split_heuristic.h"


@functools.lru_cache(maxsize=None)
def heuristic():
    """flashsplit._C.heuristic (exits with code 3 where flashsplit is not built)."""
    T.import_flashsplit("tune_num_splits", need_native=False)
    from flashsplit import _C
    return _C.heuristic


def default_constants():
    return heuristic().SplitHeuristicConstants()


def constant_fields():
    return heuristic().SplitHeuristicConstants.fields()


# ============================================================================ measuring

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--evaluate", metavar="RAW_CSV", default=None,
                   help="no measuring: report from an existing raw CSV")
    p.add_argument("--exclude-shapes-in", metavar="RAW_CSV", action="append", default=[],
                   help="with --evaluate: score only the shapes this other raw CSV lacks "
                        "(a held-out check of constants tuned on it); may be repeated")
    p.add_argument("--search", action="store_true",
                   help="tune the heuristic's constants (coordinate descent over SEARCH_GRID)")
    p.add_argument("--cc", type=int, default=90,
                   help="compute capability of the GPU a CSV was measured on (CSVs record only "
                        "its SM count)")
    p.add_argument("--budget-seconds", type=float, default=300.0)
    p.add_argument("--max-shapes", type=int, default=None, help="stop after this many shapes")
    p.add_argument("--tiles", choices=("all", "narrow", "wide"), default="all",
                   help="measure only shapes that run the narrow (decode) tile, or only the others "
                        "(to re-measure one regime after a change to it)")
    p.add_argument("--seed", type=int, default=0, help="order in which shapes are sampled")
    p.add_argument("--decode-grid", type=int, default=0, metavar="N",
                   help="measure N decode shapes drawn from bench_kvcache's GRID_RANGE (batch "
                        "1-64, k/v heads 1-8, groups 1-16, caches of 2k-512k keys, d 64/128) "
                        "instead of GRID")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--splits", default=None,
                   help="comma list of G to try (default " +
                        ",".join(map(str, CANDIDATE_SPLITS)) + ")")
    p.add_argument("--max-call-ms", type=float, default=20.0,
                   help="skip shapes whose G=1 FLOPs would take longer than this at 400 TFLOPS")
    p.add_argument("--max-scratch-gb", type=float, default=8.0,
                   help="skip G whose fp32 partials exceed this")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--max-spread", type=float, default=1.2,
                   help="when scoring: leave out timings whose median exceeds this multiple of "
                        "their p10 (0 keeps every timing)")
    p.add_argument("--blocks-per-sm", type=int, default=None,
                   help="resident blocks per SM for the 'fills the GPU' test (default: each "
                        "row's recorded blocks_per_sm)")
    constants = p.add_argument_group("split heuristic constants (SplitHeuristicConstants, "
                                     "defaults from C++)")
    for field, value in default_constants().as_dict().items():
        constants.add_argument("--" + field.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--out", default="tune_out")
    args = p.parse_args(argv)
    args.split_list = T.parse_int_list(args.splits) if args.splits else CANDIDATE_SPLITS
    return args


def constants_from(args):
    """The SplitHeuristicConstants of the command line."""
    return heuristic().SplitHeuristicConstants(
        **{field: getattr(args, field) for field in constant_fields()})


def grid_shapes(seed):
    shapes = [dict(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)
              for b, (h, hk), sq, sk, d, causal in itertools.product(*GRID.values())]
    random.Random(seed).shuffle(shapes)
    return shapes


def decode_grid_shapes(count, seed):
    """count decode shapes of bench_kvcache's --grid draw, as grid_shapes gives them."""
    from bench_kvcache import grid_shapes as kvcache_grid
    return [dict(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=False)
            for b, sq, h, hk, sk, d in kvcache_grid(count, seed)]


def measure(args):
    torch = T.require_cuda("tune_num_splits")
    flashsplit = T.import_flashsplit("tune_num_splits")
    H = heuristic()
    dtype = T.parse_dtype(torch, args.dtype)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    sms = props.multi_processor_count
    # The HBM's peak, as the plan reads it: two transfers a memory clock (kHz) over the bus.
    hbm = 2.0 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8 / 1e6
    device = H.DeviceInfo(vendor="nvidia", cc=props.major * 10 + props.minor, sm_count=sms,
                          dram_bytes_per_us=hbm)
    args.cc = device.cc  # the report models this GPU
    os.makedirs(args.out, exist_ok=True)
    raw_path = os.path.join(args.out, "tune_num_splits_raw.csv")
    began = time.perf_counter()
    shapes_done = 0
    with open(raw_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RAW_FIELDS)
        writer.writeheader()
        shapes = (decode_grid_shapes(args.decode_grid, args.seed) if args.decode_grid
                  else grid_shapes(args.seed))
        for shape in shapes:
            if time.perf_counter() - began > args.budget_seconds:
                break
            if args.max_shapes is not None and shapes_done >= args.max_shapes:
                break
            b, h, hk, sq, sk, d, causal = (shape[k] for k in ("b", "h", "hk", "sq", "sk", "d",
                                                              "causal"))
            problem = H.AttnProblem(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal,
                                    dtype=T.dtype_label(torch, dtype))
            if args.tiles != "all" and H.use_narrow_tiles(problem) != (args.tiles == "narrow"):
                continue
            flops = T.attention_flops(b, h, sq, sk, d, causal)
            if flops / 400e12 * 1e3 > args.max_call_ms:
                continue
            sets = T.make_input_sets(torch, b, h, hk, sq, sk, d, dtype, max_sets=4)
            q, k, v = sets[0]
            auto = T.explain(flashsplit, q, k, v, causal, 0)
            if auto.get("path") != "native":
                T.progress(f"skip {shape}: reference path ({auto.get('reason')})")
                continue
            kernel, details = auto["kernel"], auto  # T.explain flattens the plan's details
            heuristic_g = int(auto["num_splits"])
            model_g = H.resolve_splits_for(kernel, problem, device, 0)
            if model_g != heuristic_g:
                T.progress(f"warning: {shape}: explain chose G={heuristic_g}, "
                           f"flashsplit._C.heuristic G={model_g}")
            n_blocks = math.ceil(sk / int(details["split_block_n"]))
            gs = sorted({g for g in args.split_list if g <= n_blocks} | {1, heuristic_g})
            key_warps = int(details.get("key_warps") or 1)
            common = dict(shape, dtype=args.dtype, sms=sms, dram_bytes_per_us=hbm, kernel=kernel,
                          block_m=details["block_m"], block_n=details["block_n"],
                          blocks_per_sm=details["blocks_per_sm"], key_blocks=n_blocks,
                          grid_blocks=details["grid_blocks"], heuristic_g=heuristic_g,
                          key_warps=key_warps)
            rows, runners = {}, {}
            # Each requested G runs one-warp blocks; a call on key warps runs only unrequested.
            for g in gs + ([AUTO] if key_warps > 1 else []):
                row = dict(common, requested_g=g, g=None, ms=None, p10_ms=None, p90_ms=None,
                           status="ok")
                rows[g] = row
                if g * b * h * sq * (d + 1) * 4 > args.max_scratch_gb * 2**30:
                    row["status"] = "skipped_scratch"
                    continue
                row["g"] = heuristic_g if g == AUTO else \
                    int(T.explain(flashsplit, q, k, v, causal, g)["num_splits"])
                runner = T.flashsplit_runner(flashsplit, causal, g)
                try:
                    runner(q, k, v)  # a G that fails is reported alone, not with the others
                    runners[g] = runner
                except Exception as exc:  # noqa: BLE001
                    row["status"] = "error: " + T.short_reason(str(exc), 60)
            # All G of the shape in one interleaved measurement (see T.time_cuda_interleaved).
            T.time_rows_interleaved(torch, [(rows[g], runner) for g, runner in runners.items()],
                                    sets, args.warmup, args.reps,
                                    max_seconds=2.0 * len(runners))
            for row in rows.values():
                writer.writerow({k: T.csv_value(row.get(k)) for k in RAW_FIELDS})
            line = [f"{'auto' if g == AUTO else g}:{rows[g]['ms']:.3g}" for g in runners]
            fh.flush()
            shapes_done += 1
            T.progress(f"[{shapes_done} {time.perf_counter() - began:5.0f}s] b={b} h={h}/{hk} "
                       f"sq={sq} sk={sk} d={d} causal={causal} {kernel} heurG={heuristic_g} "
                       f"ms {' '.join(line)}")
            del sets, q, k, v
            torch.cuda.empty_cache()
    T.progress(f"measured {shapes_done} shapes in {time.perf_counter() - began:.0f}s -> {raw_path}")
    return raw_path


# ============================================================================ scoring

def unstable(row, max_spread):
    """A median more than max_spread times its own p10 means most repetitions were disturbed,
    so it measured the machine rather than the kernel: on an H100 one G of a shape sometimes
    reads 1.2-1.8x its value in other runs, with p10 near the usual time. 1.1% of the rows of
    benchmarks/data/h100_iteration_fit.csv exceed 1.2, under 0.2% of the other datasets'."""
    if not max_spread or not row.get("p10_ms"):
        return False
    return float(row["ms"]) > max_spread * float(row["p10_ms"])


def load_raw(path, max_spread=None, dropped=None):
    """Shapes of a raw CSV with their time per G. Timings failing `unstable` are left out (the
    G counts as unmeasured) and appended to `dropped` when given."""
    shapes = OrderedDict()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            row["kernel"] = row.get("kernel") or PORTABLE
            key = tuple(row[k] for k in ("b", "h", "hk", "sq", "sk", "d", "causal", "dtype"))
            entry = shapes.setdefault(key, {"info": row, "times": {}})
            if row["status"] != "ok":
                entry["incomplete"] = True
                continue
            if not row["ms"]:
                continue
            if int(row["requested_g"]) == AUTO:  # the call on key warps, apart from the splits
                if not unstable(row, max_spread):
                    entry["auto_ms"] = float(row["ms"])
                continue
            # Keyed by the G that ran (explain's clamp), the thing the time belongs to.
            g = int(row["g"] or row["requested_g"])
            if unstable(row, max_spread):
                entry.setdefault("unstable", set()).add(g)
                if dropped is not None:
                    dropped.append((key, g))
            else:
                entry["times"][g] = min(float(row["ms"]), entry["times"].get(g, math.inf))
    return shapes


class Model:
    """One shape as the plan sees it: its kernel family, problem and device, the tiles of its
    split calls and their key blocks (which clamp G), all from flashsplit._C.heuristic."""

    def __init__(self, info, cc):
        H = heuristic()
        self.family = info.get("kernel") or PORTABLE
        self.problem = H.AttnProblem(b=int(info["b"]), h=int(info["h"]), hk=int(info["hk"]),
                                     sq=int(info["sq"]), sk=int(info["sk"]), d=int(info["d"]),
                                     causal=str(info["causal"]) == "True", dtype=info["dtype"])
        self.device = H.DeviceInfo(vendor="nvidia", cc=cc, sm_count=int(info["sms"]),
                                   dram_bytes_per_us=float(info.get("dram_bytes_per_us") or 0))
        self.tiles = H.tiles_for(self.family, self.problem)
        self.key_blocks = -(-self.problem.sk // self.tiles.block_n) if self.tiles.block_n else 1

    def g(self, constants=None):
        """The G the plan runs at num_splits = 0."""
        return heuristic().resolve_splits_for(self.family, self.problem, self.device, 0,
                                              constants)

    def modelled_us(self, g, constants=None):
        """The heuristic's time for g splits on the split calls' tiles, microseconds."""
        return heuristic().modelled_split_us(self.problem, self.device, self.tiles, g, constants)


def attach_models(shapes, cc):
    for entry in shapes.values():
        entry["model"] = Model(entry["info"], cc)
    return shapes


def pick_time(times, g, key_blocks, unstable=()):
    """Time for G; a G never measured but equivalent to a measured one (same key blocks per
    split) borrows its time; otherwise None, as for a G whose timing was left out."""
    if g in times:
        return times[g]
    if g in unstable:
        return None
    per_split = math.ceil(key_blocks / g)
    same = [t for h, t in times.items() if math.ceil(key_blocks / h) == per_split]
    return min(same) if same else None


def score(shapes, choose, blocks_per_sm=None, as_run=False):
    """choose(entry) -> G. Returns the report numbers for that chooser. as_run: a shape whose
    call left to the heuristic was timed (key warps, requested_g 0) scores that time."""
    regrets, worst, filled, filled_slow, unmeasured = [], [], 0, [], 0
    for key, entry in shapes.items():
        info, times = entry["info"], entry["times"]
        if 1 not in times or entry.get("incomplete"):
            continue
        g = choose(entry)
        if as_run and "auto_ms" in entry:
            g, t = f"{g} on key warps", entry["auto_ms"]
        else:
            t = pick_time(times, g, entry["model"].key_blocks, entry.get("unstable", ()))
        if t is None:
            unmeasured += 1
            continue
        best_g, best = min(times.items(), key=lambda kv: kv[1])
        regret = t / best
        regrets.append(regret)
        worst.append((regret, key, g, best_g, t, best, times[1]))
        # The grid and residency the row recorded (explain's, for the family that ran).
        per_sm = blocks_per_sm or int(info.get("blocks_per_sm") or 0) or \
            entry["model"].tiles.blocks_per_sm
        if int(info["grid_blocks"]) >= int(info["sms"]) * per_sm:
            filled += 1
            if t > SLOWER_THAN_G1 * times[1]:
                filled_slow.append((t / times[1], key, g))
    worst.sort(reverse=True)
    gm = math.exp(sum(map(math.log, regrets)) / len(regrets)) if regrets else None
    return dict(n=len(regrets), geomean=gm, worst=worst, filled=filled,
                filled_slow=filled_slow, unmeasured=unmeasured)


def shape_text(key):
    b, h, hk, sq, sk, d, causal, dtype = key
    return f"b={b} h={h}/{hk} sq={sq} sk={sk} d={d} causal={causal} {dtype}"


def report_text(name, result, top=8, modelled=None):
    """The report of one chooser; modelled(key, g) -> us adds the model's times (on the split
    calls' tiles) to the worst shapes."""
    lines = [f"== {name}"]
    if not result["n"]:
        lines.append("  no complete shapes")
        return lines
    lines.append(f"  shapes {result['n']}  regret geomean {result['geomean']:.4f}  "
                 f"worst {result['worst'][0][0]:.3f}  (unmeasured choices skipped: "
                 f"{result['unmeasured']})")
    slow = result["filled_slow"]
    frac = len(slow) / result["filled"] if result["filled"] else 0.0
    lines.append(f"  grids that fill the GPU: {result['filled']}; heuristic > 2% slower than "
                 f"G=1 on {len(slow)} ({100 * frac:.1f}%)")
    for regret, key, g, best_g, t, best, t1 in result["worst"][:top]:
        line = (f"    regret {regret:.3f}  {shape_text(key)}  chose G={g} {t:.4g} ms, "
                f"best G={best_g} {best:.4g} ms, G=1 {t1:.4g} ms")
        if modelled:
            line += (f"; modelled G={g} {modelled(key, g):.4g} us, G={best_g} "
                     f"{modelled(key, best_g):.4g} us, G=1 {modelled(key, 1):.4g} us")
        lines.append(line)
    for ratio, key, g in sorted(slow, reverse=True)[:top]:
        lines.append(f"    filled grid slower than G=1 by x{ratio:.3f}: {shape_text(key)} G={g}")
    return lines


def model_chooser(constants):
    return lambda entry: entry["model"].g(constants)


def changed_text(constants):
    """The fields that differ from the C++ defaults, or "the C++ defaults"."""
    defaults = default_constants().as_dict()
    changed = [f"{field}={value!r}" for field, value in constants.as_dict().items()
               if value != defaults[field]]
    return " ".join(changed) if changed else "the C++ defaults"


def cpp_literal(value):
    """A constant as split_heuristic.h writes it: 3.0, 0.05, 3.2e6, 128."""
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 1e5:
        mantissa, exponent = f"{value:.6e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return repr(float(value))


def cpp_lines(constants, start):
    """split_heuristic.h's declarations of the fields that differ from start."""
    old = start.as_dict()
    return [f"  {'int' if isinstance(value, int) else 'double'} {field} = "
            f"{cpp_literal(value)};  // was {cpp_literal(old[field])}"
            for field, value in constants.as_dict().items() if value != old[field]]


# --search: the values each constant may take (the wide tiles' iteration times stay as measured;
# the narrow one is fitted with the other narrow terms).
SEARCH_GRID = OrderedDict(
    slots_per_sm_narrow=(1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
    narrow_crowding=(0.0, 0.25, 0.5, 0.75, 1.0),
    co_resident_speedup=(1.1, 1.2, 1.3, 1.4, 1.5),
    block_overhead=(2.0, 4.0, 6.0, 8.0, 12.0, 16.0),
    block_overhead_hopper=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
    dram_bytes_per_us=(2.6e6, 2.8e6, 3.0e6, 3.2e6, 3.4e6),
    one_wave_imbalance=(0.0, 0.03, 0.05, 0.08, 0.1, 0.15),
    partial_wave_penalty=(0.0, 0.05, 0.1, 0.15, 0.2, 0.3),
    split_latency_us=(0.2, 0.3, 0.4, 0.5, 0.6, 0.8),
    combine_us=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
    narrow_iteration_us=(0.5, 0.6, 0.75, 0.9, 1.0, 1.2, 1.5),
    narrow_block_overhead=(2.0, 4.0, 6.0, 8.0, 10.0, 12.0),
    narrow_chunk_latency_us=(1.0, 2.0, 3.0, 4.0),
    narrow_combine_us=(2.0, 3.0, 4.0, 6.0),
    min_gain=(0.0, 0.01, 0.02, 0.03, 0.04),
    min_gain_multi_wave=(0.02, 0.03, 0.04, 0.06),
)
SEARCH_ROUNDS = 4


def search_objective(result):
    """What --search minimises: the geometric-mean regret first (x10), then the worst and the
    99th-percentile regret, and 0.05 per filled grid made > 2 % slower than G = 1."""
    regrets = sorted(r[0] for r in result["worst"])
    p99 = regrets[int(0.99 * (len(regrets) - 1))]
    return (10 * math.log(result["geomean"]) + math.log(regrets[-1]) + math.log(p99) +
            0.05 * len(result["filled_slow"]))


def search(shapes, start, grid=SEARCH_GRID, rounds=SEARCH_ROUNDS, blocks_per_sm=None):
    """Coordinate descent from `start`: each round tries every value of grid for one constant
    at a time and keeps any that lowers search_objective. Returns (constants, report lines)."""
    lines = [f"== constant search (coordinate descent, {rounds} rounds over "
             f"{', '.join(grid)}; objective: 10 log geomean + log worst + log p99 + "
             f"0.05 per filled-slow)"]
    result = score(shapes, model_chooser(start), blocks_per_sm)
    if not result["n"]:
        return start, lines + ["  no complete shapes"]
    best, best_objective = start, search_objective(result)
    for round_no in range(rounds):
        for field, values in grid.items():
            for value in values:
                candidate = best.replace(**{field: value})
                objective = search_objective(score(shapes, model_chooser(candidate),
                                                   blocks_per_sm))
                if objective < best_objective - 1e-9:
                    best, best_objective = candidate, objective
        r = score(shapes, model_chooser(best), blocks_per_sm)
        lines.append(f"  round {round_no + 1}: geomean {r['geomean']:.4f} worst "
                     f"{r['worst'][0][0]:.3f} filled-slow {len(r['filled_slow'])}  "
                     f"constants: {changed_text(best)}")
    changes = cpp_lines(best, start)
    if changes:
        lines.append(f"  constants to put back into {SPLIT_HEURISTIC_H} "
                     f"(SplitHeuristicConstants):")
        lines += ["  " + line for line in changes]
    else:
        lines.append("  no value of the grid improves on the starting constants")
    return best, lines


def evaluate(args, raw_path):
    dropped = []
    shapes = load_raw(raw_path, args.max_spread, dropped)
    held_out_note = None
    if args.exclude_shapes_in:
        seen = set()
        for path in args.exclude_shapes_in:
            seen.update(load_raw(path))
        before = len(shapes)
        shapes = OrderedDict((key, e) for key, e in shapes.items() if key not in seen)
        held_out_note = (f"held out: {len(shapes)} of {before} shapes, those not in "
                         f"{' or '.join(args.exclude_shapes_in)}")
    attach_models(shapes, args.cc)
    constants = constants_from(args)
    recorded = score(shapes, lambda entry: int(entry["info"]["heuristic_g"]), args.blocks_per_sm,
                     as_run=True)
    model = score(shapes, model_chooser(constants), args.blocks_per_sm)
    g1 = score(shapes, lambda entry: 1, args.blocks_per_sm)
    now = {key: e["model"].g() for key, e in shapes.items()}
    disagree = [(key, now[key], int(e["info"]["heuristic_g"])) for key, e in shapes.items()
                if now[key] != int(e["info"]["heuristic_g"])]
    families = OrderedDict()
    for entry in shapes.values():
        families[entry["info"]["kernel"]] = families.get(entry["info"]["kernel"], 0) + 1
    lines = [f"tune_num_splits report from {raw_path}: {len(shapes)} shapes (kernel: " +
             ", ".join(f"{name} {count}" for name, count in families.items()) + ")"]
    if held_out_note:
        lines.append(held_out_note)
    if args.max_spread:
        lines.append(f"left out {len(dropped)} unstable timings (median > {args.max_spread} x p10; "
                     f"--max-spread 0 keeps them); a choice whose time was left out is skipped")
    lines += report_text("flashsplit heuristic (G recorded by explain; calls on key warps as "
                         "they ran)", recorded)

    def modelled(key, g):
        return shapes[key]["model"].modelled_us(g, constants)
    lines += report_text(f"C++ heuristic (flashsplit._C.heuristic) with {changed_text(constants)}",
                         model, modelled=modelled)
    lines += report_text("always G=1 (no split)", g1)
    lines.append(f"the C++ heuristic with its defaults gives the recorded G on "
                 f"{len(shapes) - len(disagree)}/{len(shapes)} shapes")
    if disagree:
        lines.append("  (a CSV records the heuristic of its build; the first differences:)")
        for key, model_g, recorded_g in disagree[:5]:
            lines.append(f"    {shape_text(key)}: now G={model_g}, recorded G={recorded_g}")
    if args.search:
        lines += search(shapes, constants, blocks_per_sm=args.blocks_per_sm)[1]
    return lines


def main(argv=None):
    args = parse_args(argv)
    if args.evaluate:
        if not os.path.exists(args.evaluate):
            print(f"tune_num_splits: --evaluate {args.evaluate!r}: no such file", file=sys.stderr)
            return 1
        print("\n".join(evaluate(args, args.evaluate)))
        return 0
    try:
        raw_path = measure(args)
    except KeyboardInterrupt:
        # Rows are flushed per shape, so what was measured is already in the CSV.
        raw_path = os.path.join(args.out, "tune_num_splits_raw.csv")
        T.progress("interrupted; evaluating the shapes measured so far")
    lines = evaluate(args, raw_path)
    with open(os.path.join(args.out, "tune_num_splits_report.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
