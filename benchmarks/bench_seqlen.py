#!/usr/bin/env python3
"""flashsplit forward vs its peers over sequence length: the benchmark users run first.

Default sweep: s = 512 ... 32k at a constant 16k tokens per batch (b = 16k / s, at least 1),
head dims 64 and 128 with h = 2048 / d heads, causal and not, bf16. Every point times
flashsplit with the heuristic's split count (G auto) and with G = 1, and in the same process
SDPA's flash, cuDNN and efficient backends, plus FlashAttention-3 / -2 when installed,
interleaved (each repetition runs every method once, so they share the GPU's conditions).
A peer that cannot run a point is reported as "n/a (reason)".

Outputs in --out: bench_seqlen.csv (one row per point and method), bench_seqlen.json (rows +
environment), bench_seqlen.png (TFLOPS vs s, one panel per (d, causal)), and
bench_seqlen_summary.txt (the few key rows).

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

FULL_SEQLENS = "512,1k,2k,4k,8k,16k,32k"
CHECK_LIMIT = 5e-2  # max |flashsplit - other| above this is flagged in the summary
QUICK_SEQLENS = "1k,4k,16k"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seqlens", default=None,
                   help=f"comma list, k = 1024 (default {FULL_SEQLENS}; --quick {QUICK_SEQLENS})")
    p.add_argument("--tokens", type=int, default=16 * 1024,
                   help="tokens per batch: b = tokens / s (at least 1)")
    p.add_argument("--fixed-batch", type=int, default=None,
                   help="use this batch size at every s instead of constant tokens")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--hidden", type=int, default=2048, help="h = hidden / d query heads")
    p.add_argument("--gqa", type=int, default=1,
                   help="group size h / hk (1 = MHA; e.g. 4 for GQA, h for MQA)")
    p.add_argument("--causal", choices=["both", "on", "off"], default="both")
    p.add_argument("--dtypes", default="bf16", help="comma list of bf16, fp16")
    p.add_argument("--peers", default=",".join(T.ALL_PEERS),
                   help="comma list (empty for none) of " + ", ".join(T.ALL_PEERS))
    p.add_argument("--warmup", type=int, default=None, help="default 5 (--quick 3)")
    p.add_argument("--reps", type=int, default=None, help="default 20 (--quick 10)")
    p.add_argument("--quick", action="store_true",
                   help="fewer lengths and repetitions (the one-call GPU script uses this)")
    p.add_argument("--out", default="bench_out", help="folder for CSV/JSON/PNG")
    args = p.parse_args(argv)
    args.seqlens = T.parse_int_list(args.seqlens or (QUICK_SEQLENS if args.quick else FULL_SEQLENS))
    args.head_dims = T.parse_int_list(args.head_dims)
    args.causal_values = {"both": [False, True], "on": [True], "off": [False]}[args.causal]
    args.dtype_names = [x.strip() for x in args.dtypes.split(",") if x.strip()]
    args.peer_names = [x.strip() for x in args.peers.split(",") if x.strip()]
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 5)
    args.reps = args.reps if args.reps is not None else (10 if args.quick else 20)
    for name in args.peer_names:
        if name not in T.ALL_PEERS:
            p.error(f"--peers: unknown peer {name!r}; choose from {', '.join(T.ALL_PEERS)}")
    if args.gqa < 1:
        p.error(f"--gqa must be >= 1, got {args.gqa}")
    return args


def points(args):
    for dtype_name in args.dtype_names:
        for d in args.head_dims:
            h = max(1, args.hidden // d)
            if h % args.gqa != 0:
                raise SystemExit(f"--gqa {args.gqa} does not divide h = {h} (hidden {args.hidden} / d {d})")
            for causal in args.causal_values:
                for s in args.seqlens:
                    b = args.fixed_batch or max(1, args.tokens // s)
                    yield OrderedDict(dtype=dtype_name, d=d, causal=causal, b=b, h=h,
                                      hk=h // args.gqa, sq=s, sk=s)


def max_abs_diff(torch, a, b):
    diff = (a.float() - b.float()).abs()
    return float("inf") if torch.isnan(diff).any() else float(diff.max())


def run_point(torch, flashsplit, args, pt, rows):
    dtype = T.parse_dtype(torch, pt["dtype"])
    b, h, hk, sq, sk, d, causal = (pt[k] for k in ("b", "h", "hk", "sq", "sk", "d", "causal"))
    flops = T.attention_flops(b, h, sq, sk, d, causal)
    sets = T.make_input_sets(torch, b, h, hk, sq, sk, d, dtype)
    q, k, v = sets[0]
    decision = T.explain(flashsplit, q, k, v, causal, 0)
    path_note = "" if decision.get("path") == "native" else \
        f"reference path: {decision.get('reason')}"

    methods = OrderedDict()
    methods["flashsplit"] = (T.flashsplit_runner(flashsplit, causal, 0), path_note)
    methods["flashsplit_g1"] = (T.flashsplit_runner(flashsplit, causal, 1), path_note)
    methods.update(T.peer_runners(torch, q, k, v, causal, args.peer_names))

    # A fast but wrong kernel must not look good: compare outputs once per point.
    check = OrderedDict()
    try:
        fs_out = T.first_output(methods["flashsplit"][0](q, k, v))
        g1_out = T.first_output(methods["flashsplit_g1"][0](q, k, v))
        check["vs_g1"] = max_abs_diff(torch, fs_out, g1_out)
        for name in ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient"):
            runner = methods.get(name, (None, ""))[0]
            if runner is not None:
                check["vs_" + name] = max_abs_diff(torch, fs_out, runner(q, k, v))
                break
        del fs_out, g1_out
    except Exception as exc:  # noqa: BLE001 - the timing below reports the failure per method
        check["failed"] = float("nan")
        T.progress(f"  output check failed: {T.short_reason(str(exc))}")

    results = OrderedDict()
    timed = []  # (row, runner) of every method that ran once: timed together below
    for name, (runner, reason) in methods.items():
        row = OrderedDict(pt)
        row.update(method=name, num_splits=None, ms=None, p10_ms=None, p90_ms=None,
                   tflops=None, status="ok", note=reason)
        if name == "flashsplit":
            row["num_splits"] = decision.get("num_splits")
        elif name == "flashsplit_g1":
            row["num_splits"] = 1
        if runner is None:
            row["status"] = "n/a"
        else:
            try:
                runner(q, k, v)
                timed.append((row, runner))
            except Exception as exc:  # noqa: BLE001 - a failing method must not end the sweep
                row.update(status="error", note=T.short_reason(str(exc)))
                torch.cuda.synchronize()
        if name == "flashsplit":
            row["check_max_abs_diff"] = "; ".join(f"{k}={v:.3g}" for k, v in check.items())
            row["check_worst"] = max(check.values()) if check else None
        rows.append(row)
        results[name] = row
    # flashsplit and the peers in one interleaved measurement: each repetition times every
    # method once, so the ratios between them share the GPU's conditions.
    T.time_rows_interleaved(torch, timed, sets, args.warmup, args.reps,
                            max_seconds=10.0 * len(timed), flops=flops)
    del sets, q, k, v
    torch.cuda.empty_cache()
    return results


def cell(row):
    if row["status"] == "ok":
        value = row["tflops"]
        return f"{value:.0f}" if value >= 10 else f"{value:.3g}"
    return "n/a" if row["status"] == "n/a" else "err"


def speedup(fs_row, peer_row):
    if fs_row["status"] != "ok" or peer_row is None or peer_row["status"] != "ok":
        return None
    return peer_row["ms"] / fs_row["ms"]


def build_table(all_results, peer_names):
    header = ["dtype", "d", "causal", "b", "h/hk", "s", "fs G", "fs", "fs G=1"] + \
             [n for n in peer_names] + [f"x{n.replace('sdpa_', '')}" for n in peer_names]
    lines = []
    for pt, res in all_results:
        fs = res["flashsplit"]
        line = [pt["dtype"], pt["d"], "Y" if pt["causal"] else "N", pt["b"],
                f"{pt['h']}/{pt['hk']}", pt["sq"], T.fmt(fs["num_splits"]), cell(fs),
                cell(res["flashsplit_g1"])]
        line += [cell(res[n]) for n in peer_names]
        line += [T.fmt(speedup(fs, res[n]), 3) for n in peer_names]
        lines.append(line)
    return T.format_table(lines, header)


def footnotes(all_results, peer_names):
    """One line per (method, reason) instead of long reasons inside the table."""
    seen = OrderedDict()
    for _, res in all_results:
        for name in ["flashsplit", "flashsplit_g1"] + list(peer_names):
            row = res[name]
            if row["note"]:
                key = (name, row["status"], row["note"])
                seen[key] = seen.get(key, 0) + 1
    return [f"  {name}: {status} ({note}) at {count} point(s)"
            for (name, status, note), count in seen.items()]


def summary_lines(all_results, peer_names):
    """Key rows: for each (dtype, d, causal) the longest s, then geometric-mean speedups."""
    last = OrderedDict()
    for pt, res in all_results:
        last[(pt["dtype"], pt["d"], pt["causal"])] = (pt, res)
    out = ["bench_seqlen (TFLOPS; xPEER = PEER time / flashsplit time, > 1 means flashsplit faster)"]
    for (dtype, d, causal), (pt, res) in last.items():
        fs = res["flashsplit"]
        parts = [f"{dtype} d={d} causal={'Y' if causal else 'N'} s={pt['sq']} b={pt['b']}: "
                 f"fs {cell(fs)} (G={T.fmt(fs['num_splits'])})"]
        for n in peer_names:
            if res[n]["status"] == "ok":
                parts.append(f"{n} {cell(res[n])}")
        out.append(" ".join(parts))
    # Two correct bf16/fp16 implementations differ by ~1e-2 at most on these random inputs.
    suspicious = [(pt, res["flashsplit"]["check_worst"]) for pt, res in all_results
                  if res["flashsplit"].get("check_worst") is not None
                  and not res["flashsplit"]["check_worst"] <= CHECK_LIMIT]
    for pt, worst in suspicious[:5]:
        out.append(f"WARNING: flashsplit output differs by {worst:.3g} (> {CHECK_LIMIT}) from "
                   f"G=1/a peer at d={pt['d']} causal={pt['causal']} s={pt['sq']}")
    absent = []
    for n in peer_names:
        ratios = [speedup(res["flashsplit"], res[n]) for _, res in all_results]
        ratios = [r for r in ratios if r]
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            out.append(f"geomean x{n} = {gm:.3f} over {len(ratios)} points "
                       f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
        else:
            notes = {res[n]["note"] for _, res in all_results if res[n]["note"]}
            absent.append(f"{n} ({'; '.join(sorted(notes))[:60] or 'no comparable points'})")
    if absent:
        out.append("no comparison with: " + ", ".join(absent))
    return out


def plot(path, all_results, method_names):
    plt = T.try_import_pyplot()
    if plt is None:
        return False
    panels = OrderedDict()
    for pt, res in all_results:
        panels.setdefault((pt["d"], pt["causal"]), []).append((pt, res))
    n = len(panels)
    cols = min(2, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, ((d, causal), entries) in zip(axes.flat, panels.items()):
        dtypes = sorted({pt["dtype"] for pt, _ in entries})
        for dtype in dtypes:
            for name in method_names:
                xs, ys = [], []
                for pt, res in entries:
                    row = res[name]
                    if pt["dtype"] == dtype and row["status"] == "ok":
                        xs.append(pt["sq"])
                        ys.append(row["tflops"])
                if xs:
                    label = name if len(dtypes) == 1 else f"{name} {dtype}"
                    style = "-o" if name.startswith("flashsplit") else "--."
                    ax.plot(xs, ys, style, label=label)
        ax.set_xscale("log", base=2)
        ticks = sorted({pt["sq"] for pt, _ in entries})
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t // 1024}k" if t % 1024 == 0 else str(t) for t in ticks])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("sequence length (sq = sk)")
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"d={d}, causal={causal}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    T.save_figure(plt, fig, axes, n, path, dpi=110, title="flashsplit forward vs peers")
    return True


def main(argv=None):
    args = parse_args(argv)
    torch, flashsplit, env = T.start_benchmark("bench_seqlen", args.out)

    plan = list(points(args))
    rows, all_results = [], []
    began = time.perf_counter()
    interrupted = False
    try:
        for i, pt in enumerate(plan):
            point_rows = []
            res = run_point(torch, flashsplit, args, pt, point_rows)
            rows.extend(point_rows)  # only whole points: tables need every method of a point
            all_results.append((pt, res))
            fs = res["flashsplit"]
            peers = " ".join(f"{n}={cell(res[n])}" for n in args.peer_names)
            T.progress(f"[{i + 1}/{len(plan)} {time.perf_counter() - began:5.1f}s] {pt['dtype']} "
                       f"d={pt['d']} causal={pt['causal']} b={pt['b']} s={pt['sq']}: fs={cell(fs)} "
                       f"(G={fs['num_splits']}) g1={cell(res['flashsplit_g1'])} {peers}")
    except KeyboardInterrupt:
        # A time limit (timeout -s INT) still leaves the points measured so far on disk.
        interrupted = True
        T.progress(f"interrupted after {len(all_results)}/{len(plan)} points; writing those")

    stem = os.path.join(args.out, "bench_seqlen")
    T.write_csv(stem + ".csv", rows)
    T.write_json(stem + ".json", {"environment": env, "args": vars(args), "rows": rows})
    method_names = ["flashsplit", "flashsplit_g1"] + args.peer_names
    plotted = plot(stem + ".png", all_results, method_names)
    summary = summary_lines(all_results, args.peer_names)
    with open(stem + "_summary.txt", "w") as fh:
        fh.write("\n".join(summary) + "\n")

    print(build_table(all_results, args.peer_names))
    notes = footnotes(all_results, args.peer_names)
    if notes:
        print("notes:")
        print("\n".join(notes))
    print("\n".join(summary))
    print(f"wrote {stem}.csv, {stem}.json" + (f", {stem}.png" if plotted else "") +
          f", {stem}_summary.txt")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
