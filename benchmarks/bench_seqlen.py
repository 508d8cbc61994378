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

Without a CUDA device it runs a small CPU sweep instead and says so: no GPU kernel is timed
there. flashsplit.flash_attn_func on CPU tensors (its reference path) against
torch.nn.functional.scaled_dot_product_attention on the CPU, fp32, b = 1 (or --fixed-batch),
h = 8 heads (h / --gqa k/v heads), s = 128 ... 1k (or --seqlens), with the same outputs (GFLOPS
instead of TFLOPS). It shows that the install works end to end, not how fast the GPU kernels are.

Exit codes: 0 ok, 2 torch not importable, 3 flashsplit not importable, or (with a CUDA device)
built without GPU kernels.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time
from collections import OrderedDict

import _timing as T

FULL_SEQLENS = "512,1k,2k,4k,8k,16k,32k"
CHECK_LIMIT = 5e-2  # max |flashsplit - other| above this is flagged in the summary
QUICK_SEQLENS = "1k,4k,16k"
# The CPU sweep (no CUDA device): small enough to finish in about a minute on two cores.
CPU_SEQLENS = "128,256,512,1k"
CPU_QUICK_SEQLENS = "128,512"
CPU_HEADS = 8
CPU_CHECK_LIMIT = 1e-4  # fp32 on both sides


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seqlens", default=None,
                   help=f"comma list, k = 1024 (default {FULL_SEQLENS}; --quick {QUICK_SEQLENS})")
    p.add_argument("--tokens", type=int, default=16 * 1024,
                   help="tokens per batch: b = tokens / s (at least 1)")
    p.add_argument("--fixed-batch", type=int, default=None,
                   help="use this batch size at every s instead of constant tokens")
    p.add_argument("--head-dims", default="64,128",
                   help="comma list of head dims; d:dv gives v its own head dim (e.g. 192:128)")
    p.add_argument("--hidden", type=int, default=2048, help="h = hidden / d query heads")
    p.add_argument("--gqa", type=int, default=1,
                   help="group size h / hk (1 = MHA; e.g. 4 for GQA, h for MQA)")
    p.add_argument("--causal", choices=["both", "on", "off"], default="both")
    p.add_argument("--dtypes", default="bf16", help="comma list of bf16, fp16")
    p.add_argument("--peers", default=",".join(T.ALL_PEERS),
                   help="comma list (empty for none) of " + ", ".join(T.ALL_PEERS))
    p.add_argument("--warmup", type=int, default=None, help="default 5 (--quick 3; CPU sweep 2)")
    p.add_argument("--reps", type=int, default=None,
                   help="default 20 (--quick 10; CPU sweep 7)")
    p.add_argument("--quick", action="store_true",
                   help="fewer lengths and repetitions (the one-call GPU script uses this)")
    p.add_argument("--out", default="bench_out", help="folder for CSV/JSON/PNG")
    args = p.parse_args(argv)
    # The CPU sweep has its own defaults for what was not given explicitly.
    args.cpu_seqlens = T.parse_int_list(args.seqlens or
                                        (CPU_QUICK_SEQLENS if args.quick else CPU_SEQLENS))
    args.cpu_warmup = args.warmup if args.warmup is not None else 2
    args.cpu_reps = args.reps if args.reps is not None else 7
    args.seqlens = T.parse_int_list(args.seqlens or (QUICK_SEQLENS if args.quick else FULL_SEQLENS))
    args.head_dims = T.parse_head_dims(args.head_dims)
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
        for d, dv in args.head_dims:
            h = max(1, args.hidden // d)
            if h % args.gqa != 0:
                raise SystemExit(f"--gqa {args.gqa} does not divide h = {h} (hidden {args.hidden} / d {d})")
            for causal in args.causal_values:
                for s in args.seqlens:
                    b = args.fixed_batch or max(1, args.tokens // s)
                    yield OrderedDict(dtype=dtype_name, d=d, dv=dv, causal=causal, b=b, h=h,
                                      hk=h // args.gqa, sq=s, sk=s)


def max_abs_diff(torch, a, b):
    diff = (a.float() - b.float()).abs()
    return float("inf") if torch.isnan(diff).any() else float(diff.max())


def run_point(torch, flashsplit, args, pt, rows):
    dtype = T.parse_dtype(torch, pt["dtype"])
    b, h, hk, sq, sk, d, dv, causal = (pt[k] for k in ("b", "h", "hk", "sq", "sk", "d", "dv",
                                                       "causal"))
    flops = T.attention_flops(b, h, sq, sk, d, causal, dv=dv)
    sets = T.make_input_sets(torch, b, h, hk, sq, sk, d, dtype, dv=dv)
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


def dim_label(pt):
    return T.head_dim_label(pt["d"], pt["dv"])


def build_table(all_results, peer_names):
    header = ["dtype", "d", "causal", "b", "h/hk", "s", "fs G", "fs", "fs G=1"] + \
             [n for n in peer_names] + [f"x{n.replace('sdpa_', '')}" for n in peer_names]
    lines = []
    for pt, res in all_results:
        fs = res["flashsplit"]
        line = [pt["dtype"], dim_label(pt), "Y" if pt["causal"] else "N", pt["b"],
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
        last[(pt["dtype"], dim_label(pt), pt["causal"])] = (pt, res)
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
                   f"G=1/a peer at d={dim_label(pt)} causal={pt['causal']} s={pt['sq']}")
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


def plot(path, all_results, method_names, value_key="tflops", ylabel="TFLOPS",
         title="flashsplit forward vs peers"):
    plt = T.try_import_pyplot()
    if plt is None:
        return False
    panels = OrderedDict()
    for pt, res in all_results:
        panels.setdefault((dim_label(pt), pt["causal"]), []).append((pt, res))
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
                        ys.append(row[value_key])
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
        ax.set_ylabel(ylabel)
        ax.set_title(f"d={d}, causal={causal}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    T.save_figure(plt, fig, axes, n, path, dpi=110, title=title)
    return True


# ----------------------------------------------------------------------------- CPU sweep

CPU_METHODS = ("flashsplit", "sdpa_cpu")
NO_GPU_NOTE = ("no CUDA device: GPU kernels were NOT timed. This CPU sweep times flashsplit's "
               "reference path against SDPA on the CPU (fp32); it shows the install works, not "
               "how fast the GPU kernels are. Run on an NVIDIA GPU for the real benchmark.")


def cpu_points(args):
    h = CPU_HEADS
    if h % args.gqa != 0:
        raise SystemExit(f"--gqa {args.gqa} does not divide the CPU sweep's h = {h}")
    for d, dv in args.head_dims:
        for causal in args.causal_values:
            for s in args.cpu_seqlens:
                yield OrderedDict(dtype="fp32", d=d, dv=dv, causal=causal,
                                  b=args.fixed_batch or 1, h=h, hk=h // args.gqa, sq=s, sk=s)


def time_cpu_interleaved(fns, warmup, reps):
    """Median / p10 / p90 wall time (ms) of each function, timed interleaved: each repetition
    runs every function once, in an order that rotates from one repetition to the next."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i in range(reps):
            for j in range(len(fns)):
                f = (i + j) % len(fns)
                start = time.perf_counter()
                fns[f]()
                times[f].append((time.perf_counter() - start) * 1e3)
    finally:
        if collecting:
            gc.enable()
    result = []
    for samples in times:
        samples.sort()
        result.append((statistics.median(samples), samples[int(0.1 * (len(samples) - 1))],
                       samples[int(0.9 * (len(samples) - 1))]))
    return result


def run_cpu_point(torch, flashsplit, args, pt):
    import torch.nn.functional as F
    b, h, hk, sq, sk, d, dv, causal = (pt[k] for k in ("b", "h", "hk", "sq", "sk", "d", "dv",
                                                       "causal"))
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(b, sq, h, d, generator=gen)
    k = torch.randn(b, sk, hk, d, generator=gen)
    v = torch.randn(b, sk, hk, dv, generator=gen)
    decision = T.explain(flashsplit, q, k, v, causal, 0)
    kwargs = {"is_causal": causal}
    if h != hk:
        kwargs["enable_gqa"] = True

    def ours():
        return T.first_output(flashsplit.flash_attn_func(q, k, v, causal=causal))

    def sdpa():
        # SDPA takes (b, h, s, d); sq == sk here, so its top-left causal mask is flashsplit's.
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), **kwargs).transpose(1, 2)

    worst = max_abs_diff(torch, ours(), sdpa())
    timings = time_cpu_interleaved([ours, sdpa], args.cpu_warmup, args.cpu_reps)
    flops = T.attention_flops(b, h, sq, sk, d, causal, dv=dv)
    results = OrderedDict()
    for name, (ms, p10, p90) in zip(CPU_METHODS, timings):
        row = OrderedDict(device="cpu", **pt)
        row.update(method=name, num_splits=None, ms=ms, p10_ms=p10, p90_ms=p90,
                   gflops=flops / (ms * 1e-3) / 1e9, status="ok", note="")
        if name == "flashsplit":
            row.update(num_splits=decision.get("num_splits"),
                       note=f"{decision.get('path')} path: {decision.get('reason')}",
                       check_max_abs_diff=f"vs_sdpa_cpu={worst:.3g}", check_worst=worst)
        results[name] = row
    return results


def cpu_table(all_results):
    header = ["dtype", "d", "causal", "b", "h/hk", "s", "flashsplit ms", "sdpa_cpu ms",
              "flashsplit GFLOPS", "sdpa_cpu GFLOPS", "xsdpa_cpu"]
    lines = []
    for pt, res in all_results:
        fs, peer = res["flashsplit"], res["sdpa_cpu"]
        lines.append([pt["dtype"], dim_label(pt), "Y" if pt["causal"] else "N", pt["b"],
                      f"{pt['h']}/{pt['hk']}", pt["sq"], f"{fs['ms']:.3g}", f"{peer['ms']:.3g}",
                      f"{fs['gflops']:.3g}", f"{peer['gflops']:.3g}",
                      f"{peer['ms'] / fs['ms']:.3f}"])
    return T.format_table(lines, header)


def cpu_summary(all_results, torch):
    out = ["bench_seqlen CPU sweep (" + NO_GPU_NOTE + ")",
           f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; "
           f"flashsplit ran: {all_results[0][1]['flashsplit']['note'] if all_results else '-'}"]
    ratios = [res["sdpa_cpu"]["ms"] / res["flashsplit"]["ms"] for _, res in all_results]
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out.append(f"geomean xsdpa_cpu = {gm:.3f} over {len(ratios)} points "
                   f"(min {min(ratios):.3f}, max {max(ratios):.3f}; SDPA time / flashsplit time)")
    worst = max((res["flashsplit"]["check_worst"] for _, res in all_results), default=0.0)
    out.append(f"largest |flashsplit - sdpa_cpu| over all points: {worst:.3g}" +
               ("" if worst <= CPU_CHECK_LIMIT else f"  WARNING: above {CPU_CHECK_LIMIT}"))
    return out


def cpu_main(args, torch):
    """The sweep without a CUDA device (module docstring): reference path vs SDPA on the CPU."""
    T.progress("bench_seqlen: " + NO_GPU_NOTE)
    flashsplit = T.import_flashsplit("bench_seqlen", need_native=False)
    os.makedirs(args.out, exist_ok=True)
    plan = list(cpu_points(args))
    rows, all_results = [], []
    began = time.perf_counter()
    for i, pt in enumerate(plan):
        res = run_cpu_point(torch, flashsplit, args, pt)
        rows.extend(res.values())
        all_results.append((pt, res))
        T.progress(f"[{i + 1}/{len(plan)} {time.perf_counter() - began:5.1f}s] cpu fp32 "
                   f"d={dim_label(pt)} causal={pt['causal']} s={pt['sq']}: "
                   f"flashsplit {res['flashsplit']['ms']:.3g} ms, "
                   f"sdpa_cpu {res['sdpa_cpu']['ms']:.3g} ms")
    stem = os.path.join(args.out, "bench_seqlen")
    T.write_csv(stem + ".csv", rows)
    env = OrderedDict(device="cpu", torch=torch.__version__, threads=torch.get_num_threads(),
                      note=NO_GPU_NOTE)
    try:
        env["flashsplit_build"] = flashsplit._C.build_info()
    except Exception as exc:  # noqa: BLE001 - the sweep itself needs no native build
        env["flashsplit_build"] = f"unavailable: {exc}"
    T.write_json(stem + ".json", {"environment": env, "args": vars(args), "rows": rows})
    plotted = plot(stem + ".png", all_results, list(CPU_METHODS), value_key="gflops",
                   ylabel="GFLOPS (CPU)",
                   title="CPU sweep: flashsplit reference path vs SDPA (GPU kernels not timed)")
    summary = cpu_summary(all_results, torch)
    with open(stem + "_summary.txt", "w") as fh:
        fh.write("\n".join(summary) + "\n")
    print(cpu_table(all_results))
    print("\n".join(summary))
    print(f"wrote {stem}.csv, {stem}.json" + (f", {stem}.png" if plotted else "") +
          f", {stem}_summary.txt")
    return 0


def main(argv=None):
    args = parse_args(argv)
    torch = T.import_torch("bench_seqlen")
    if not torch.cuda.is_available():
        return cpu_main(args, torch)
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
                       f"d={dim_label(pt)} causal={pt['causal']} b={pt['b']} s={pt['sq']}: "
                       f"fs={cell(fs)} (G={fs['num_splits']}) g1={cell(res['flashsplit_g1'])} "
                       f"{peers}")
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
