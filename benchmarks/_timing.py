"""Shared pieces of the flashsplit benchmarks: GPU check, timing, FLOP/byte counts, peers.

Timing method (why it looks like this):
- CUDA events around each call, median over repetitions after warm-up: robust to the odd slow
  iteration and measures GPU time, not Python time.
- Before each timed call the GPU is kept busy with a sleep kernel (not inside the events), so the
  host has finished enqueueing the call before the start event fires; otherwise a tiny decode
  kernel would be timed together with the Python overhead of launching it.
- When one input set fits in L2 (50 MB on H100), several sets are rotated so every call reads
  its inputs from HBM, as it would inside a model: call by call, also across the functions of
  one interleaved repetition (a set shared by a repetition would let every function after the
  first read inputs the first had just pulled into L2).
- The functions of a repetition run in an order that changes from one repetition to the next,
  each taking every place equally often: on a power-capped H100 a call's time depends on the
  calls just before it (in the fixed order flashsplit, flashsplit, SDPA flash, SDPA cuDNN the
  first of two equal flashsplit calls reads 2-3% slower than the second), so a fixed order
  would charge that to whichever function comes first.
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib
import json
import math
import os
import random
import statistics
import sys
import time
import warnings
from collections import OrderedDict
from typing import Callable, Dict, List, Optional, Sequence, Tuple

EXIT_NO_GPU = 2
EXIT_NO_EXTENSION = 3

# Ceilings measured on an H100 80GB HBM3 (docs/performance.md): the floors bench_splitkv reports.
PEAK_TFLOPS_BF16 = 795.0      # dense bf16 matmul 8192^3
PEAK_BYTES_PER_S = 3.02e12    # device-to-device copy, read + write bytes
L2_BYTES = 50 * 1024 * 1024

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16"}


# ----------------------------------------------------------------------------- environment

def import_torch(program: str):
    """Returns torch; exits with code 2 and says why when it cannot be imported."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a hard requirement
        print(f"{program}: cannot import torch ({exc}); nothing to benchmark.", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)
    return torch


def require_cuda(program: str):
    """Returns torch when a CUDA device is visible; otherwise exits with code 2 and says why."""
    torch = import_torch(program)
    if not torch.cuda.is_available():
        print(f"{program}: no CUDA device is visible (torch {torch.__version__}, "
              f"torch.version.cuda={torch.version.cuda}). These benchmarks time GPU kernels; "
              f"run them on a machine with an NVIDIA GPU.", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)
    return torch


def import_flashsplit(program: str, need_native: bool = True):
    """Imports flashsplit (falling back to the source tree's python/ folder) and checks that its
    GPU kernels were built, so a benchmark never silently times the reference path."""
    try:
        flashsplit = importlib.import_module("flashsplit")
    except ImportError:
        repo_python = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "python")
        sys.path.insert(0, repo_python)
        try:
            flashsplit = importlib.import_module("flashsplit")
        except ImportError as exc:
            print(f"{program}: cannot import flashsplit ({exc}). Build it first, e.g. "
                  f"`pip install --no-build-isolation --no-deps .` or "
                  f"`python setup.py build_ext --inplace` with PYTHONPATH=python.", file=sys.stderr)
            sys.exit(EXIT_NO_EXTENSION)
    if need_native:
        try:
            from flashsplit import _C
            info = _C.build_info()
        except Exception as exc:  # noqa: BLE001 - any failure here means no native build
            print(f"{program}: flashsplit._C is not usable ({exc}); build the extension first.",
                  file=sys.stderr)
            sys.exit(EXIT_NO_EXTENSION)
        if not info.get("gpu_kernels_built", False):
            print(f"{program}: flashsplit was built without GPU kernels (build_info={info}); "
                  f"timings would measure the reference path. Reinstall with `pip install -v "
                  f"--no-build-isolation .`: the build says why it skipped the GPU kernels.",
                  file=sys.stderr)
            sys.exit(EXIT_NO_EXTENSION)
    return flashsplit


def start_benchmark(program: str, out_dir: str):
    """What each benchmark does first: exit clearly without a GPU or a native build, make the
    output folder, and announce the environment. Returns (torch, flashsplit, environment)."""
    torch = require_cuda(program)
    flashsplit = import_flashsplit(program)
    os.makedirs(out_dir, exist_ok=True)
    env = environment_summary(torch, flashsplit)
    progress(f"{program} on " + ", ".join(f"{k}={v}" for k, v in env.items()))
    return torch, flashsplit, env


def environment_summary(torch, flashsplit=None) -> Dict[str, object]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    env = OrderedDict(
        gpu=props.name,
        cc=f"{props.major}.{props.minor}",
        sms=props.multi_processor_count,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    )
    if flashsplit is not None:
        try:
            env["flashsplit_build"] = flashsplit._C.build_info()
        except Exception as exc:  # noqa: BLE001
            env["flashsplit_build"] = f"unavailable: {exc}"
    return env


def parse_dtype(torch, name: str):
    name = name.strip().lower()
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
             "fp16": torch.float16, "float16": torch.float16, "half": torch.float16}
    if name not in table:
        raise SystemExit(f"unknown dtype {name!r}; use bf16 or fp16")
    return table[name]


def dtype_label(torch, dtype) -> str:
    return "bf16" if dtype == torch.bfloat16 else "fp16" if dtype == torch.float16 else str(dtype)


def parse_head_dims(text: str) -> List[Tuple[int, int]]:
    """"64,128,192:128" -> [(64, 64), (128, 128), (192, 128)]: q's and k's head dim, and v's
    after a colon where it differs."""
    dims = []
    for part in text.split(","):
        if part.strip():
            d, _, dv = part.partition(":")
            dims.append((int(d), int(dv or d)))
    return dims


def head_dim_label(d: int, dv: int) -> str:
    """"128", or "192/128" where v's head dim differs."""
    return str(d) if dv == d else f"{d}/{dv}"


def parse_shape(text: str, fields: str) -> Tuple[int, ...]:
    """A --shape value: comma-separated ints, one for each of `fields` ("b,sq,h,hk,s_cache,d");
    argparse reports the ArgumentTypeError, which names the fields."""
    parts = tuple(int(x) for x in text.split(","))
    if len(parts) != len(fields.split(",")):
        raise argparse.ArgumentTypeError(f"a shape is {fields}, got {text!r}")
    return parts


def parse_int_list(text: str) -> List[int]:
    values = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        scale = 1
        if part.endswith("k"):
            scale, part = 1024, part[:-1]
        values.append(int(part) * scale)
    return values


# ----------------------------------------------------------------------------- work counts

def visible_pairs(sq: int, sk: int, causal: bool, align: str = "bottom_right") -> int:
    """Exact number of (query, key) pairs that enter the softmax.

    bottom_right (flashsplit, flash-attn >= 2.1): query i sees key j iff j <= i + sk - sq.
    top_left (SDPA's is_causal): query i sees key j iff j <= i. Both agree when sq == sk.
    """
    if not causal:
        return sq * sk
    offset = sk - sq if align == "bottom_right" else 0
    # Row i sees clamp(i + offset + 1, 0, sk) keys: zero for i < -offset - 1, then a ramp, then
    # sk. Summed in closed form so 128k-row problems cost nothing.
    first_nonzero = max(0, -offset)              # first row with at least one key
    first_full = max(0, sk - offset - 1)          # first row that sees all sk keys
    total = 0
    ramp_begin, ramp_end = first_nonzero, min(sq, first_full)
    if ramp_end > ramp_begin:
        # sum_{i=a}^{b-1} (i + offset + 1)
        count = ramp_end - ramp_begin
        total += count * (offset + 1) + (ramp_begin + ramp_end - 1) * count // 2
    full_rows = sq - max(first_full, first_nonzero)
    if full_rows > 0:
        total += full_rows * sk
    return total


def attention_flops(b: int, h: int, sq: int, sk: int, d: int, causal: bool,
                    align: str = "bottom_right", dv: Optional[int] = None) -> int:
    """Forward FLOPs: two GEMMs (QK^T over d and PV over v's head dim dv, d by default), 2 flops
    per multiply-add: 2 * pairs * (d + dv)."""
    return 2 * b * h * visible_pairs(sq, sk, causal, align) * (d + (d if dv is None else dv))


def attention_io_bytes(b: int, h: int, hk: int, sq: int, sk: int, d: int,
                       elem_bytes: int = 2) -> int:
    """Compulsory HBM traffic of a forward: read q, k, v once, write out and the fp32 lse."""
    return elem_bytes * (2 * b * sq * h * d + 2 * b * sk * hk * d) + 4 * b * h * sq


def floors_ms(flops: float, io_bytes: float) -> Tuple[float, float]:
    """(compute floor, memory floor) in ms from the measured ceilings."""
    return flops / (PEAK_TFLOPS_BF16 * 1e12) * 1e3, io_bytes / PEAK_BYTES_PER_S * 1e3


def tflops(flops: float, ms: Optional[float]) -> Optional[float]:
    if ms is None or ms <= 0 or not math.isfinite(ms):
        return None
    return flops / (ms * 1e-3) / 1e12


# ----------------------------------------------------------------------------- inputs

def make_input_sets(torch, b, h, hk, sq, sk, d, dtype, max_sets: int = 8, seed: int = 0,
                    dv: Optional[int] = None, min_sets: int = 1):
    """Random (q, k, v) sets in the (b, s, h, d) layout (v of head dim dv, d by default);
    several when one set fits in L2, so rotating among them keeps every timed call reading from
    HBM (at least min_sets: 2 makes consecutive calls read different sets however large)."""
    set_bytes = attention_io_bytes(b, h, hk, sq, sk, d, torch.finfo(dtype).bits // 8)
    n_sets = 1 if set_bytes >= 2 * L2_BYTES else min(max_sets, math.ceil(2 * L2_BYTES / set_bytes))
    n_sets = max(n_sets, min_sets)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    sets = []
    for _ in range(n_sets):
        q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(b, sk, hk, d if dv is None else dv, device="cuda", dtype=dtype,
                        generator=gen)
        sets.append((q, k, v))
    return sets


# Inputs whose scores stress the online softmax, beside plain random ones (bench_adversarial.py,
# tests/test_gpu_adversarial.py).
ADVERSARIAL_KINDS = ("random", "rising", "falling", "sink")


def adversarial_qkv(torch, kind, b, h, hk, sq, sk, d, dtype, seed=0):
    """(q, k, v) on the GPU. "random": unit normals. "rising" / "falling": every query leans
    along one direction u and key j along t_j * u, so each row's scaled scores grow (shrink)
    by about 20 from the first key to the last and every key block moves the running max, in
    one walking order or the other. "sink": key 0 scores about 30 above every other key for
    every row (an attention sink), the rest is random."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    q = torch.randn(b, sq, h, d, device="cuda", generator=gen)
    k = torch.randn(b, sk, hk, d, device="cuda", generator=gen)
    v = torch.randn(b, sk, hk, d, device="cuda", generator=gen)
    if kind != "random":
        u = torch.randn(d, device="cuda", generator=gen)
        u = u * (d ** 0.5 / u.norm())  # |u|^2 = d: a score of t * d, scaled by 1/sqrt(d)
        q = 0.25 * q + u
        if kind == "sink":
            t = torch.zeros(sk, device="cuda")
            t[0] = 30.0 / d ** 0.5
        else:
            t = torch.linspace(0.0, 20.0 / d ** 0.5, sk, device="cuda")
            if kind == "falling":
                t = t.flip(0)
        k = 0.25 * k + t[None, :, None, None] * u
    return tuple(x.to(dtype) for x in (q, k, v))


# ----------------------------------------------------------------------------- timing

class Timing(dict):
    """median_ms, p10_ms, p90_ms, reps."""


def _host_launch_seconds(fn: Callable, args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def time_cuda(torch, fn: Callable, arg_sets: Sequence[tuple], warmup: int = 5, reps: int = 20,
              max_seconds: float = 10.0) -> Timing:
    """Median CUDA-event time of fn(*args), rotating over arg_sets (time_cuda_interleaved with
    one function)."""
    return time_cuda_interleaved(torch, [fn], arg_sets, warmup, reps, max_seconds)[0]


def time_cuda_interleaved(torch, fns: Sequence[Callable], arg_sets: Sequence[tuple],
                          warmup: int = 5, reps: int = 20,
                          max_seconds: float = 10.0) -> List[Timing]:
    """Median CUDA-event times of several functions compared with each other (split counts of
    one shape, peers): each repetition times every function once, so a drift of the GPU's
    speed during the measurement (clocks, power, the previous shape's after-effects) falls on
    all of them alike instead of on whichever ran first. On an H100, timing split counts one
    after another reads the first ones of some decode shapes 15-18% slow against other runs
    (docs/performance.md). The order within a repetition changes so that
    every function takes every place equally often (a fixed order charged the slower first
    place to one function; module docstring). Each call takes the next of arg_sets, so no call
    reads inputs its predecessor left in L2.

    Python's garbage collector is paused (as timeit does): a collection during a call stalls
    its enqueue by up to a few ms, which the GPU would otherwise count (host_stalled_reps
    reports what is left)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _time_cuda_interleaved(torch, list(fns), arg_sets, warmup, reps, max_seconds)
    finally:
        if collecting:
            gc.enable()


def _time_cuda_interleaved(torch, fns: List[Callable], arg_sets: Sequence[tuple], warmup: int,
                           reps: int, max_seconds: float) -> List[Timing]:
    """Stops early (with at least 3 rounds) when the measured calls exceed max_seconds, so one
    huge shape cannot eat a whole benchmark budget."""
    for fn in fns:
        for i in range(warmup):
            fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    # The sleep must outlast the host-side enqueue of one call; measure it on warm calls.
    host_s = max(min(_host_launch_seconds(fn, arg_sets[0]) for _ in range(3)) for fn in fns)
    torch.cuda.synchronize()
    sleep_cycles = int(max(50e-6, 4 * host_s) * 2.0e9)  # <= 2 GHz SM clock: long enough
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(reps)] for _ in fns]
    host_ms = [[] for _ in fns]  # host time to enqueue each timed call
    rounds = 0
    began = time.perf_counter()
    n = len(fns)
    check_every = n * -(-4 // n)  # the smallest multiple of n that is at least 4
    shuffler = random.Random(0)  # the same orders in every run
    for i in range(reps):
        # Every n repetitions rotate one shuffled order through its n places, so each function
        # takes each place once per n repetitions and follows different functions across them.
        if i % n == 0:
            base = list(range(n))
            shuffler.shuffle(base)
        order = base[i % n:] + base[:i % n]
        for place, f in enumerate(order):
            fn = fns[f]
            # Every call takes the next input set, so where several sets rotate (one fits in
            # L2) no call reads the inputs the call before it has just pulled into L2.
            args = arg_sets[(i * n + place) % len(arg_sets)]
            start, end = events[f][i]
            torch.cuda._sleep(sleep_cycles)
            start.record()
            t0 = time.perf_counter()
            fn(*args)
            host_ms[f].append((time.perf_counter() - t0) * 1e3)
            end.record()
        rounds += 1
        # The time budget is checked at the end of a block of places (every 4 repetitions or
        # more), so an early stop leaves every function in every place equally often.
        if rounds >= 3 and rounds % check_every == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - began > max_seconds:
                break
    torch.cuda.synchronize()
    sleep_ms = sleep_cycles / 2.0e9 * 1e3
    results = []
    for f in range(len(fns)):
        times = sorted(start.elapsed_time(end) for start, end in events[f][:rounds])
        result = Timing()
        result["median_ms"] = statistics.median(times)
        result["p10_ms"] = times[int(0.1 * (len(times) - 1))]
        result["p90_ms"] = times[int(0.9 * (len(times) - 1))]
        result["reps"] = len(times)
        # Calls whose enqueue outlasted the sleep: their GPU times include host time.
        result["host_max_ms"] = max(host_ms[f])
        result["host_stalled_reps"] = sum(ms > sleep_ms for ms in host_ms[f])
        results.append(result)
    return results


def time_rows_interleaved(torch, timed: Sequence[tuple], arg_sets: Sequence[tuple], warmup: int,
                          reps: int, max_seconds: float,
                          flops: Optional[float] = None) -> List[Timing]:
    """Times the runners of timed = [(row, runner), ...] in one interleaved measurement
    (time_cuda_interleaved) and fills each row's ms / p10_ms / p90_ms columns, and tflops when
    flops is given. Returns each runner's Timing, in order ([] when timed is empty)."""
    if not timed:
        return []
    timings = time_cuda_interleaved(torch, [runner for _, runner in timed], arg_sets, warmup,
                                    reps, max_seconds)
    for (row, _), timing in zip(timed, timings):
        row.update(ms=timing["median_ms"], p10_ms=timing["p10_ms"], p90_ms=timing["p90_ms"])
        if flops is not None:
            row["tflops"] = tflops(flops, timing["median_ms"])
    return timings


# ----------------------------------------------------------------------------- flashsplit

def flashsplit_runner(flashsplit, causal: bool, num_splits: int) -> Callable:
    def run(q, k, v):
        return flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=num_splits)
    return run


def explain(flashsplit, q, k, v, causal: bool, num_splits: int = 0) -> Dict[str, object]:
    """flashsplit.explain's decision as one flat dict: the kernel internals it nests under
    "details" (block_m, grid_blocks, tail_tiles, ...) beside path, kernel, num_splits and
    reason, which the benchmarks record."""
    decision = dict(flashsplit.explain(q, k, v, causal=causal, num_splits=num_splits))
    details = decision.pop("details", None) or {}
    return {**details, **decision}


def first_output(result):
    """flash_attn_func may return out or (out, lse, ...); the benchmarks only need out."""
    return result[0] if isinstance(result, (tuple, list)) else result


# ----------------------------------------------------------------------------- peers

SDPA_PEERS = OrderedDict([
    ("sdpa_flash", "FLASH_ATTENTION"),
    ("sdpa_cudnn", "CUDNN_ATTENTION"),
    ("sdpa_efficient", "EFFICIENT_ATTENTION"),
])
# A peer's modules, tried in order: FlashAttention-3's forward wheel on PyPI (fa3-fwd, bf16;
# its interface imports a module flash_attn_config, which `from fa3_fwd_config import CONFIG`
# provides) or a FlashAttention-3 build from source, and FlashAttention-2.
OPTIONAL_PEERS = OrderedDict([
    ("fa3", ("fa3_fwd_interface", "flash_attn_interface")),
    ("fa2", ("flash_attn",)),
])
ALL_PEERS = list(SDPA_PEERS) + list(OPTIONAL_PEERS)


def short_reason(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# SDPA's warnings name the backend ("... kernel not used because:") and then give the reasons
# as separate warnings; the headers and the final generic error carry no information.
_SDPA_GENERIC = ("not used because", "has been disabled", "No available kernel",
                 "No viable backend", "disabled via the context manager")


def sdpa_refusal_reason(messages: Sequence[str]) -> str:
    reasons = []
    for message in messages:
        message = message.split("(Triggered internally")[0].strip()
        if message and not any(g in message for g in _SDPA_GENERIC) and message not in reasons:
            reasons.append(message)
    return "; ".join(reasons)


def _sdpa_runner(torch, backend_name: str, causal: bool, gqa: bool) -> Callable:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    backend = getattr(SDPBackend, backend_name)
    kwargs = {"is_causal": causal}
    if gqa:
        kwargs["enable_gqa"] = True

    def run(q, k, v):
        # SDPA takes (b, h, s, d): transposed views, no copies.
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                  v.transpose(1, 2), **kwargs).transpose(1, 2)
    return run


def import_peer(module_names: Sequence[str]):
    """(the first of the modules that imports, "") or (None, why none did)."""
    reason = "not installed"
    for name in module_names:
        try:
            return importlib.import_module(name), ""
        except ImportError:
            continue
        except Exception as exc:  # noqa: BLE001 - any import failure means "cannot use it"
            reason = short_reason(f"{name}: import failed: {exc}")
    return None, reason


def fa3_module():
    """FlashAttention-3's interface module, or None where it is not installed."""
    return import_peer(OPTIONAL_PEERS["fa3"])[0]


def _optional_runner(module_names: Sequence[str], causal: bool
                     ) -> Tuple[Optional[Callable], str]:
    module, reason = import_peer(module_names)
    if module is None:
        return None, reason
    module_name = module.__name__
    fn = getattr(module, "flash_attn_func", None)
    if fn is None:
        return None, f"{module_name} has no flash_attn_func"

    def run(q, k, v):
        return first_output(fn(q, k, v, causal=causal))
    return run, ""


def peer_runners(torch, q, k, v, causal: bool, peers: Sequence[str] = ALL_PEERS
                 ) -> "OrderedDict[str, Tuple[Optional[Callable], str]]":
    """name -> (runner, "") when the peer can run this problem, or (None, reason) when not.

    Each runner is probed once; a peer that refuses gets the reason it gave (SDPA's warnings
    say why a backend was rejected), so tables show "n/a (reason)" instead of dropping it.
    """
    sq, sk, h, hk = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    result = OrderedDict()
    for name in peers:
        if name in SDPA_PEERS:
            if causal and sq != sk:
                result[name] = (None, "SDPA causal is top-left aligned; compared only at sq==sk")
                continue
            run = _sdpa_runner(torch, SDPA_PEERS[name], causal, gqa=(h != hk))
        elif name in OPTIONAL_PEERS:
            run, reason = _optional_runner(OPTIONAL_PEERS[name], causal)
            if run is None:
                result[name] = (None, reason)
                continue
        else:
            result[name] = (None, "unknown peer")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run(q, k, v)
                torch.cuda.synchronize()
                result[name] = (run, "")
            except Exception as exc:  # noqa: BLE001 - report, never crash the sweep
                reason = sdpa_refusal_reason([str(w.message) for w in caught])
                result[name] = (None, short_reason(reason or str(exc).splitlines()[0], 120))
    return result


# ----------------------------------------------------------------------------- output

def write_csv(path: str, rows: List[Dict[str, object]]) -> None:
    if not rows:
        return
    fields: List[str] = []
    for row in rows:
        for key in row:
            if key not in fields:
                fields.append(key)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: csv_value(row.get(k)) for k in fields})


def write_results(out_dir: Optional[str], name: str, rows: List[Dict[str, object]]) -> None:
    """rows as the CSV out_dir/name where the benchmark was given an output folder (--out)."""
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        write_csv(os.path.join(out_dir, name), rows)


def csv_value(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def write_json(path: str, payload) -> None:
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=1, default=str)


def format_table(rows: List[List[str]], header: List[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def try_import_pyplot():
    """matplotlib's pyplot on the Agg backend, or None (plots are then skipped, not fatal)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except Exception as exc:  # noqa: BLE001
        progress(f"matplotlib unavailable ({exc}); skipping the plot")
        return None


def save_figure(plt, fig, axes, used: int, path: str, dpi: int, title: Optional[str] = None):
    """Blanks the grid's unused panels (after the first `used`), lays out, writes and closes."""
    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
