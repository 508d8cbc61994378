#!/usr/bin/env python3
"""Split-KV sweep: time every split count G on the shapes split-KV is for, next to the peers.

For each shape (b, h, hk, sq, sk, d), non-causal: the plan's own call (num_splits=0: the
heuristic's G, or on the portable narrow tile the unsplit tile with key warps, "1kw"), G = 1
and every G in {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128} that does not exceed the number of
key blocks (explain's split_block_n); the best of them; SDPA flash / cuDNN /
efficient (and FA3 / FA2 when installed); and the two floors from the measured H100 ceilings
(795 TFLOPS bf16, 3.02 TB/s): the time the FLOPs need and the time the compulsory bytes need.
A shape's split counts and peers are timed interleaved (each repetition runs each once).

Outputs in --out: bench_splitkv.csv (one row per shape and method/G), bench_splitkv.json,
bench_splitkv.png (time vs G per shape) and bench_splitkv_summary.txt (one line per shape).

Exit codes: 0 ok, 2 no CUDA device, 3 flashsplit not built with GPU kernels.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import OrderedDict

import _timing as T

# (b, h, hk, sq, sk, d): prefill-like shapes with few query tiles, then decode.
LONG_SHAPES = [
    (1, 2, 2, 40000, 40000, 64),
    (1, 16, 16, 128, 65535, 64),
    (1, 8, 8, 32768, 32768, 64),
    (8, 16, 16, 8192, 8192, 64),
    (1, 16, 16, 8192, 8192, 128),
]
DECODE_SHAPES = [(b, h, hk, 1, sk, d)
                 for b in (1, 8)
                 for (h, hk, d) in ((32, 8, 128), (16, 16, 64))
                 for sk in (4096, 16384, 65536, 131072)]
QUICK_SHAPES = [
    (1, 16, 16, 128, 65535, 64),
    (8, 16, 16, 8192, 8192, 64),
    (1, 2, 2, 40000, 40000, 64),
    (1, 32, 8, 1, 65536, 128),
    (8, 32, 8, 1, 131072, 128),
    (1, 16, 16, 1, 16384, 64),
]
FULL_SPLITS = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128]
QUICK_SPLITS = [2, 4, 8, 16, 32, 64]


def parse_shape(text):
    return T.parse_shape(text.replace("(", "").replace(")", ""), "b,h,hk,sq,sk,d")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"{len(QUICK_SHAPES)} shapes, G in {QUICK_SPLITS}, fewer repetitions")
    p.add_argument("--shape", type=parse_shape, action="append", default=None,
                   help="b,h,hk,sq,sk,d (repeatable); replaces the default shape list")
    p.add_argument("--splits", default=None, help="comma list of G >= 2 to try")
    p.add_argument("--dtype", default="bf16", help="bf16 or fp16")
    p.add_argument("--peers", default=",".join(T.ALL_PEERS),
                   help="comma list (empty for none) of " + ", ".join(T.ALL_PEERS))
    p.add_argument("--warmup", type=int, default=None, help="default 3 (--quick 2)")
    p.add_argument("--reps", type=int, default=None, help="default 15 (--quick 8)")
    p.add_argument("--max-scratch-gb", type=float, default=16.0,
                   help="skip G whose fp32 partials (G*b*h*sq*(d+1)*4 bytes) exceed this")
    p.add_argument("--out", default="bench_out", help="folder for CSV/JSON/PNG")
    args = p.parse_args(argv)
    args.shapes = args.shape or (QUICK_SHAPES if args.quick else LONG_SHAPES + DECODE_SHAPES)
    args.split_list = (T.parse_int_list(args.splits) if args.splits
                       else QUICK_SPLITS if args.quick else FULL_SPLITS)
    args.peer_names = [x.strip() for x in args.peers.split(",") if x.strip()]
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 3)
    args.reps = args.reps if args.reps is not None else (8 if args.quick else 15)
    for name in args.peer_names:
        if name not in T.ALL_PEERS:
            p.error(f"--peers: unknown peer {name!r}; choose from {', '.join(T.ALL_PEERS)}")
    for g in args.split_list:
        if g < 2:
            p.error(f"--splits: every G must be >= 2 (G = 1 is always timed), got {g}")
    return args


def shape_label(shape):
    return "(" + ",".join(str(x) for x in shape) + ")"


def scratch_bytes(g, b, h, sq, d):
    return g * b * h * sq * (d + 1) * 4


def note_host_stalls(row, timing):
    """Says in the row's note when some timed calls waited on the host's enqueue."""
    if timing["host_stalled_reps"]:
        row["note"] = (f"{timing['host_stalled_reps']}/{timing['reps']} reps waited on the host "
                       f"(enqueue up to {timing['host_max_ms']:.3f} ms)")


def run_shape(torch, flashsplit, args, shape, rows):
    b, h, hk, sq, sk, d = shape
    dtype = T.parse_dtype(torch, args.dtype)
    causal = False
    flops = T.attention_flops(b, h, sq, sk, d, causal)
    io = T.attention_io_bytes(b, h, hk, sq, sk, d, torch.finfo(dtype).bits // 8)
    flop_floor, byte_floor = T.floors_ms(flops, io)
    sets = T.make_input_sets(torch, b, h, hk, sq, sk, d, dtype)
    q, k, v = sets[0]
    auto = T.explain(flashsplit, q, k, v, causal, 0)
    native = auto.get("path") == "native"
    block_n = int(auto.get("split_block_n") or 0)
    n_blocks = math.ceil(sk / block_n) if block_n > 0 else 1
    heuristic_g = int(auto.get("num_splits", 1))
    key_warps = int(auto.get("key_warps") or 0) > 1
    # The key-warp tile's blocks an SM: 1 (the full tile) or 2 (the half-size one).
    key_warp_blocks_per_sm = int(auto.get("blocks_per_sm") or 0) if key_warps else 0

    # G = 1, the plan's own call (requested 0), then every listed G the key blocks allow.
    requested = [1, 0] + [g for g in args.split_list if g <= n_blocks]
    seen, candidates = set(), []
    for g in requested:
        if g not in seen:
            seen.add(g)
            candidates.append(g)

    base = OrderedDict(shape=shape_label(shape), b=b, h=h, hk=hk, sq=sq, sk=sk, d=d,
                       dtype=args.dtype, causal=causal, flops=flops, io_bytes=io,
                       flop_floor_ms=flop_floor, byte_floor_ms=byte_floor,
                       key_blocks=n_blocks, heuristic_g=heuristic_g, key_warps=key_warps,
                       key_warp_blocks_per_sm=key_warp_blocks_per_sm)
    results = OrderedDict()
    timed = []  # (row, runner): every G and peer that ran once, timed together below
    reference_out = None
    for g in candidates:
        row = OrderedDict(base)
        runs = T.explain(flashsplit, q, k, v, causal, g).get("num_splits")
        row.update(method=f"flashsplit G={g}" if g else "flashsplit plan", requested_g=g,
                   num_splits=runs, ms=None,
                   tflops=None, status="ok",
                   note="" if native else f"reference path: {auto.get('reason')}")
        if scratch_bytes(g, b, h, sq, d) > args.max_scratch_gb * 2**30:
            row.update(status="skipped",
                       note=f"partials need {scratch_bytes(g, b, h, sq, d) / 2**30:.1f} GiB "
                            f"> --max-scratch-gb {args.max_scratch_gb}")
        else:
            runner = T.flashsplit_runner(flashsplit, causal, g)
            try:
                out = T.first_output(runner(q, k, v))
                if reference_out is None:
                    reference_out = out
                else:
                    diff = (out.float() - reference_out.float()).abs()
                    row["max_abs_diff_vs_g1"] = (float("inf") if torch.isnan(diff).any()
                                                 else float(diff.max()))
                del out
                timed.append((row, runner))
            except Exception as exc:  # noqa: BLE001
                row.update(status="error", note=T.short_reason(str(exc)))
        rows.append(row)
        results[g] = row
    del reference_out

    peers = T.peer_runners(torch, q, k, v, causal, args.peer_names)
    peer_rows = OrderedDict()
    for name, (runner, reason) in peers.items():
        row = OrderedDict(base)
        row.update(method=name, requested_g=None, num_splits=None, ms=None, tflops=None,
                   status="ok" if runner else "n/a", note=reason)
        if runner is not None:
            try:
                runner(q, k, v)
                timed.append((row, runner))
            except Exception as exc:  # noqa: BLE001
                row.update(status="error", note=T.short_reason(str(exc)))
        rows.append(row)
        peer_rows[name] = row
    # Split counts and peers in one interleaved measurement, so their ratios share conditions.
    timings = T.time_rows_interleaved(torch, timed, sets, args.warmup, args.reps,
                                      max_seconds=10.0 * len(timed), flops=flops)
    for (row, _), timing in zip(timed, timings):
        note_host_stalls(row, timing)
    del sets, q, k, v
    torch.cuda.empty_cache()
    return base, results, peer_rows


def best_of(results):
    """(ms, G) of the fastest call; G = 0 is the plan's own call."""
    ok = [(row["ms"], g) for g, row in results.items() if row["status"] == "ok"]
    return min(ok) if ok else (None, None)


def plan_label(base):
    """The plan's split count: "1kw" where it runs the narrow tile with key warps, "1kw2" where
    it runs their half-size tile, two blocks an SM."""
    if not base["key_warps"]:
        return str(base["heuristic_g"])
    return f"{base['heuristic_g']}kw" + ("2" if base["key_warp_blocks_per_sm"] == 2 else "")


def ms_or_status(row):
    if row is None:
        return "-"
    return f"{row['ms']:.4g}" if row["status"] == "ok" else row["status"]


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def shape_summary(base, results, peer_rows):
    g1 = results[1]
    heur = results.get(0)
    best_ms, best_g = best_of(results)
    if best_g == 0:  # the plan's call is the fastest: name it by what it runs
        best_g = plan_label(base)
    floor = max(base["flop_floor_ms"], base["byte_floor_ms"])
    return OrderedDict(
        shape=base["shape"], key_blocks=base["key_blocks"],
        g1_ms=g1["ms"] if g1["status"] == "ok" else None,
        heuristic_g=plan_label(base),
        heuristic_ms=heur["ms"] if heur and heur["status"] == "ok" else None,
        best_g=best_g, best_ms=best_ms,
        regret=ratio(heur["ms"] if heur and heur["status"] == "ok" else None, best_ms),
        split_speedup=ratio(g1["ms"] if g1["status"] == "ok" else None, best_ms),
        floor_ms=floor,
        fraction_of_floor=ratio(floor, heur["ms"] if heur and heur["status"] == "ok" else None),
        peers={name: (row["ms"] if row["status"] == "ok" else f"n/a ({row['note']})")
               for name, row in peer_rows.items()},
    )


def build_table(summaries, peer_names):
    header = ["shape", "kblk", "G=1 ms", "heurG", "heur ms", "bestG", "best ms", "regret",
              "G1/best"] + [n.replace("sdpa_", "") for n in peer_names] + \
             ["flop flr", "byte flr", "%floor"]
    lines = []
    for s in summaries:
        line = [s["shape"], s["key_blocks"], T.fmt(s["g1_ms"], 4), s["heuristic_g"],
                T.fmt(s["heuristic_ms"], 4), T.fmt(s["best_g"]), T.fmt(s["best_ms"], 4),
                T.fmt(s["regret"], 3), T.fmt(s["split_speedup"], 3)]
        for n in peer_names:
            value = s["peers"].get(n)
            line.append(T.fmt(value, 4) if isinstance(value, float) else "n/a")
        frac = s["fraction_of_floor"]
        line += [T.fmt(s["_flop_floor"], 3), T.fmt(s["_byte_floor"], 3),
                 "-" if frac is None else f"{100 * frac:.2g}%"]
        lines.append(line)
    return T.format_table(lines, header)


def plot(path, per_shape):
    plt = T.try_import_pyplot()
    if plt is None or not per_shape:
        return False
    n = len(per_shape)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (base, results, peer_rows) in zip(axes.flat, per_shape):
        pts = [(g, row["ms"]) for g, row in sorted(results.items())
               if g > 0 and row["status"] == "ok"]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3, label="flashsplit")
        heur = results.get(0)
        if heur is not None and heur["status"] == "ok":
            ax.plot([base["heuristic_g"]], [heur["ms"]], "r*", ms=10,
                    label="plan (key warps)" if base["key_warps"] else "heuristic G")
        for name, row in peer_rows.items():
            if row["status"] == "ok":
                ax.axhline(row["ms"], ls="--", lw=1, label=name, color=None)
        ax.axhline(max(base["flop_floor_ms"], base["byte_floor_ms"]), ls=":", color="k",
                   lw=1, label="floor")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(base["shape"], fontsize=8)
        ax.set_xlabel("G")
        ax.set_ylabel("ms")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    T.save_figure(plt, fig, axes, n, path, dpi=100)
    return True


def main(argv=None):
    args = parse_args(argv)
    torch, flashsplit, env = T.start_benchmark("bench_splitkv", args.out)

    rows, per_shape, summaries = [], [], []
    began = time.perf_counter()
    interrupted = False
    try:
        for i, shape in enumerate(args.shapes):
            shape_rows = []
            base, results, peer_rows = run_shape(torch, flashsplit, args, shape, shape_rows)
            rows.extend(shape_rows)  # only whole shapes
            per_shape.append((base, results, peer_rows))
            s = shape_summary(base, results, peer_rows)
            s["_flop_floor"], s["_byte_floor"] = base["flop_floor_ms"], base["byte_floor_ms"]
            summaries.append(s)
            gs = " ".join(f"{g}:{ms_or_status(r)}" for g, r in sorted(results.items()))
            ps = " ".join(f"{n}:{ms_or_status(r)}" for n, r in peer_rows.items())
            T.progress(f"[{i + 1}/{len(args.shapes)} {time.perf_counter() - began:5.1f}s] "
                       f"{base['shape']} kblk={base['key_blocks']} heurG={plan_label(base)} | "
                       f"ms G {gs} | {ps}")
    except KeyboardInterrupt:
        # A time limit (timeout -s INT) still leaves the shapes measured so far on disk.
        interrupted = True
        T.progress(f"interrupted after {len(summaries)}/{len(args.shapes)} shapes; writing those")

    stem = os.path.join(args.out, "bench_splitkv")
    T.write_csv(stem + ".csv", rows)
    T.write_json(stem + ".json", {"environment": env, "args": vars(args), "rows": rows,
                                  "summaries": summaries})
    plotted = plot(stem + ".png", per_shape)
    lines = ["bench_splitkv (ms; regret = heuristic G time / best G time; "
             "G1/best = gain of the best split over none)"]
    unavailable = OrderedDict()
    for s in summaries:
        peers = " ".join(f"{n}={T.fmt(v, 4)}" for n, v in s["peers"].items()
                         if isinstance(v, float)) or "no peer ran"
        for n, v in s["peers"].items():
            if not isinstance(v, float):
                unavailable.setdefault(n, "(" + T.short_reason(v[len("n/a ("):-1], 60) + ")")
        lines.append(f"{s['shape']}: G1 {T.fmt(s['g1_ms'], 4)} | heur G={s['heuristic_g']} "
                     f"{T.fmt(s['heuristic_ms'], 4)} (regret {T.fmt(s['regret'], 3)}) | best "
                     f"G={T.fmt(s['best_g'])} {T.fmt(s['best_ms'], 4)} | {peers} | "
                     f"floor {T.fmt(s['floor_ms'], 3)}")
    if unavailable:
        lines.append("peers n/a on some shapes: " +
                     ", ".join(f"{n} {why}" for n, why in unavailable.items()))
    regrets = [s["regret"] for s in summaries if s["regret"]]
    if regrets:
        gm = math.exp(sum(math.log(r) for r in regrets) / len(regrets))
        lines.append(f"heuristic regret: geomean {gm:.3f}, worst {max(regrets):.3f} "
                     f"over {len(regrets)} shapes")
    with open(stem + "_summary.txt", "w") as fh:
        fh.write("\n".join(lines) + "\n")

    print(build_table(summaries, args.peer_names))
    notes = OrderedDict()
    for _, results, peer_rows in per_shape:
        for row in list(results.values()) + list(peer_rows.values()):
            if row["note"]:
                key = (row["method"].split(" G=")[0], row["status"], row["note"])
                notes[key] = notes.get(key, 0) + 1
    if notes:
        print("notes:")
        for (name, status, note), count in notes.items():
            print(f"  {name}: {status} ({note}) x{count}")
    print("\n".join(lines))
    print(f"wrote {stem}.csv, {stem}.json" + (f", {stem}.png" if plotted else "") +
          f", {stem}_summary.txt")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
