"""FLASHSPLIT_AUTOTUNE=1: pick the split count G by timing instead of by the heuristic.

On the first call of a shape bucket the native forward is timed once per candidate G on the
call's own tensors; the fastest G is kept in memory and in a small JSON file per device under
the user's cache folder, so later calls and later processes skip the timing. Off by default:
the heuristic needs no warm-up, and timing costs a few dozen kernel runs per new bucket.

Only the choice of G lives here; ops.attn_fwd decides when to ask (native path, num_splits=0).
"""

import json
import math
import os
import re
import statistics
import tempfile
import threading
import warnings

import torch

from . import _native, _stamp

ENV_FLAG = "FLASHSPLIT_AUTOTUNE"
CACHE_DIR_ENV = _stamp.CACHE_DIR_ENV

# Beside 1 (no split) and the heuristic's own answer: a roughly geometric ladder, so a bucket
# costs ~14 timings rather than one per possible G.
SPLIT_LADDER = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128)
WARMUP_RUNS = 2
TIMED_RUNS = 5
_FILE_FORMAT = 1

# cache file path -> {bucket text: entry}; each file is read at most once per process.
_tables = {}
_warned_paths = set()  # (path, "read" | "write")
_lock = threading.Lock()


def enabled():
    return _native.env_flag(ENV_FLAG)


# ------------------------------------------------------------------------------- buckets

def next_power_of_two(n):
    """Smallest power of two >= n (1 for n <= 1): the bucket edge for sq and sk."""
    if n <= 1:
        return 1
    return 1 << (int(n) - 1).bit_length()


def bucket_key(q, k, causal, kernel):
    """(dtype, d, causal, b, h, hk, sq rounded up, sk rounded up, kernel family).

    b and the head counts stay exact because they set how many tiles fill the GPU, which is
    what G trades against; sq and sk only round up so nearby lengths share one timing.
    """
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    dtype = str(q.dtype).replace("torch.", "")
    return (dtype, int(d), bool(causal), int(b), int(h), int(hk), next_power_of_two(sq),
            next_power_of_two(sk), str(kernel))


def _bucket_text(bucket):
    # JSON object keys are strings; the field names keep the file readable by a person.
    dtype, d, causal, b, h, hk, sq, sk, kernel = bucket
    return (f"{dtype}|d={d}|causal={int(causal)}|b={b}|h={h}|hk={hk}|sq<={sq}|sk<={sk}|"
            f"{kernel}")


def key_blocks(sk, block_n):
    if block_n <= 0:
        raise ValueError(f"block_n must be > 0 to count key blocks, got {block_n}")
    return max(1, math.ceil(sk / block_n))


def candidate_splits(heuristic_g, sk, block_n):
    """1, the heuristic's G and the ladder, each clamped to the key-block count, deduplicated
    and sorted: the kernels clamp G the same way, so larger values would time the same run."""
    limit = key_blocks(sk, block_n)
    wanted = (1, int(heuristic_g)) + SPLIT_LADDER
    return sorted({min(max(1, g), limit) for g in wanted})


# ---------------------------------------------------------------------------- cache file

def cache_dir():
    """The folder of the autotune cache: flashsplit's cache folder (_stamp.cache_dir)."""
    return _stamp.cache_dir()


def device_label(device):
    """Name and arch (sm_90, gfx942): the best G differs between GPU models, not between two
    cards of one model, so this (not the device index) is what a cache file belongs to."""
    identity = _stamp.device_identity(torch.device(device).index or 0)
    return f"{identity['gpu']} {identity['arch']}"


def cache_path(label):
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._-") or "unknown_device"
    return os.path.join(cache_dir(), f"autotune_{safe}.json")


def _warn_once(path, kind, message):
    # Once per file and problem: a broken cache must not flood a training loop's log.
    if (path, kind) not in _warned_paths:
        _warned_paths.add((path, kind))
        warnings.warn(f"flashsplit autotune: {message}", RuntimeWarning, stacklevel=2)


def _valid_entry(entry):
    return (isinstance(entry, dict) and isinstance(entry.get("num_splits"), int)
            and not isinstance(entry["num_splits"], bool) and entry["num_splits"] >= 1)


def _parse_table(text, label):
    """The bucket table of a file's text; ValueError when it is not a file this module wrote."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != _FILE_FORMAT:
        raise ValueError(f"not a format-{_FILE_FORMAT} autotune file")
    if data.get("device") != label:
        raise ValueError(f"written for device {data.get('device')!r}, not {label!r}")
    buckets = data.get("buckets")
    if not isinstance(buckets, dict) or not all(_valid_entry(e) for e in buckets.values()):
        raise ValueError("malformed bucket entries")
    return dict(buckets)


def _read_table(path, label):
    """The file's table, or {} when there is none. A file that cannot be read or parsed must
    not break attention calls: warn once, start empty, and the next write replaces it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        _warn_once(path, "read", f"cannot read {path} ({e}); re-tuning")
        return {}
    try:
        return _parse_table(text, label)
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        _warn_once(path, "read", f"ignoring unusable cache file {path} ({e}); re-tuning")
        return {}


def _write_table(path, label, table):
    """Atomically (temp file + os.replace): a reader in another process sees the old file or
    the new one, never half of one. Two processes tuning at once: the last writer wins and the
    other's new buckets are only timed again later."""
    payload = {"format": _FILE_FORMAT, "device": label, "buckets": table}
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".autotune-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        # A read-only home must not break calls: the choice still holds for this process.
        _warn_once(path, "write",
                   f"cannot write {path} ({e}); keeping the tuning in memory only")


def _table_for(path, label):
    if path not in _tables:
        _tables[path] = _read_table(path, label)
    return _tables[path]


def clear_memory_cache():
    """Forget what this process read or tuned (the files stay): the next lookup reads the file
    again, as a new process would."""
    with _lock:
        _tables.clear()
        _warned_paths.clear()


# --------------------------------------------------------------------------------- timing

def cuda_event_timer(fn, warmup=WARMUP_RUNS, runs=TIMED_RUNS):
    """Median milliseconds of fn() on the current CUDA stream, after warm-up runs (which take
    first-launch and allocator costs out of the measurement)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def fastest(candidates, run, timer):
    """(best G, {G: ms}) timing run(G) per candidate; ties go to the smaller G (less scratch).
    A candidate that runs out of memory (large G needs G partial outputs) is left out."""
    times = {}
    for g in candidates:
        try:
            times[g] = float(timer(lambda g=g: run(g)))
        except torch.cuda.OutOfMemoryError:
            continue
    if not times:
        return None, times
    return min(times, key=lambda g: (times[g], g)), times


def tuned_num_splits(label, bucket, candidates, run, timer=cuda_event_timer):
    """The G cached for bucket on the device called label, timing run(G) over the candidates
    on first sight and saving the winner; None when no candidate could be timed."""
    path = cache_path(label)
    text = _bucket_text(bucket)
    with _lock:
        entry = _table_for(path, label).get(text)
    if entry is not None:
        return entry["num_splits"]
    best, times = fastest(candidates, run, timer)
    if best is None:
        return None
    with _lock:
        table = _table_for(path, label)
        table[text] = {"num_splits": best, "times_ms": {str(g): t for g, t in times.items()}}
        _write_table(path, label, table)
    return best


# ---------------------------------------------------------------------------- entry point

def _on_device(device):
    """Makes device current: the kernels run on its current stream, so the capture check and
    the timer's events must look at that stream too (not at the current device's)."""
    return torch.cuda.device(device)


def _stream_capturing(device):
    with _on_device(device):
        return torch.cuda.is_current_stream_capturing()


def timing_blocker(q):
    """Why the call cannot be timed now, or None. Timing synchronises the stream, which is
    illegal inside a CUDA graph capture and meaningless while torch.compile traces."""
    if torch.compiler.is_compiling():
        return "torch.compile is tracing"
    if not q.is_cuda:
        return "the tensors are not on a CUDA device"
    if _stream_capturing(q.device):
        return "a CUDA graph is being captured"
    return None


def choose_num_splits(q, k, v, softmax_scale, causal, decision, timer=cuda_event_timer):
    """The G to run for a native-path call that asked for num_splits=0.

    decision is _native.gate_decision's dict for this call. Falls back to the heuristic's G
    (and caches nothing) when the call cannot be timed.
    """
    heuristic_g = int(decision["num_splits"])
    if timing_blocker(q) is not None:
        return heuristic_g
    bucket = bucket_key(q, k, causal, decision["kernel"])
    sk = k.shape[1]
    # G >= 2 runs the split tiles, whose key blocks clamp G (an unsplit call's may be smaller).
    block_n = decision["details"]["split_block_n"]
    candidates = candidate_splits(heuristic_g, sk, block_n)

    def run(g):
        return _native.native_forward(q, k, v, softmax_scale, causal, g)

    with _on_device(q.device):
        best = tuned_num_splits(device_label(q.device), bucket, candidates, run, timer)
    if best is None:
        return heuristic_g
    # The bucket spans sk up to twice this call's; G beyond this call's key blocks means the
    # same as the clamped value, so say so.
    return min(best, key_blocks(sk, block_n))
