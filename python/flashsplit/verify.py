"""python -m flashsplit.verify: check flashsplit's native kernels on this GPU, and admit it.

Runs the correctness matrix on the local GPU: bf16 and fp16, every head dim built, causal and
not, MHA / GQA / MQA, query and key lengths from 1 through odd to long, every split mode (no
split, the heuristic's G, a forced G and so the combine), and rows that see no key. Then calls of
sequences of their own lengths through the public entry points, each required to run natively
(strict): varlen prefill, and chunks of queries against kv caches, contiguous and paged, whose
unused rows hold NaN. Each native result (each sequence's) is compared with a float64
reference: a case passes when its error is at most twice the
error of the same attention computed in the inputs' precision (plus 1e-3), its lse matches to
1e-3 (relative and absolute), rows that see no key are 0 with lse -inf, and nothing is NaN.
Prints a table. On a pass it writes a stamp (GPU name, arch, build id) to flashsplit's cache
folder, and from then on the gate admits this GPU with this build; a failed run says what
failed, removes any stamp of this GPU and build, and admits nothing.

Exit codes: 0 pass, 1 a case failed, 2 no GPU or no GPU kernels in this build.
"""

import argparse
import itertools
import math
import os
import sys

import torch

from . import _C, _native, _stamp, reference

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
HEAD_DIMS = (64, 96, 128, 192, 256)  # each one the build has (build_info()["head_dims"])
HEADS = ((4, 4), (8, 2), (6, 1))  # (h, hk): MHA, GQA, MQA
# (b, sq, sk): one query and key, decode, odd lengths, square, more queries than keys (the
# first sq - sk rows of a causal call see no key), long keys.
LENGTHS = ((1, 1, 1), (2, 1, 4099), (2, 3, 517), (1, 77, 77), (1, 256, 256), (1, 300, 100),
           (2, 128, 8192))
SPLITS = (1, 0, 4)  # no split, the heuristic's G, a forced G
OUT_SLACK, LSE_TOL = 1e-3, 1e-3
# Sequence calls, (h, hk) = (8, 2): varlen (an empty sequence, one of more queries than keys, one
# of a single query and key), and 5 queries against rows of a 3-row cache of 200 keys
# (cache_batch_idx) or against the same keys in shuffled pages of 16.
SEQUENCE_FORMS = ("varlen", "kv cache", "paged kv cache")
Q_LENS, K_LENS = (37, 0, 70, 1), (91, 13, 60, 1)
CACHE_QUERIES, CACHE_LENS, CACHE_ROWS, CACHE_KEYS, PAGE = 5, (157, 60, 1), (2, 0, 1), 200, 16
SEQUENCE_SPLITS = (1, 0, 3)


def _lowp_attention(q, k, v, scale, causal):
    """Attention in the inputs' precision, the tolerance's yardstick: scores and P V in q.dtype
    (as the kernels' matrix units take them), softmax in fp32."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    group = h // hk
    kk = k.repeat_interleave(group, dim=2).transpose(1, 2)
    vv = v.repeat_interleave(group, dim=2).transpose(1, 2)
    scores = torch.matmul(q.transpose(1, 2) * scale, kk.transpose(-1, -2)).float()
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None]
        cols = torch.arange(sk, device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows + sk - sq, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.matmul(probs.to(q.dtype), vv).transpose(1, 2)


def check_case(dtype, d, causal, h, hk, b, sq, sk, num_splits, gen):
    """(passed, measured error, bound, kernel, G, what failed) of one case."""
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    scale = d ** -0.5
    plan = _native.gate_decision(q, k, v, causal, 0.0, -1, -1, 0.0, False, num_splits)
    if plan["path"] != "native":
        return False, math.inf, 0.0, "reference", 1, f"not native: {plan['reason']}"
    out, lse = _native.native_forward(q, k, v, scale, causal, num_splits)
    torch.cuda.synchronize()
    failed, err, bound = _verdict(out, lse, q, k, v, scale, causal)
    return not failed, err, bound, plan["kernel"], plan["num_splits"], "; ".join(failed)


def _verdict(out, lse, q, k, v, scale, causal):
    """(what failed, error, bound) of out (b, sq, h, d) and lse (b, h, sq) of attention over
    q (b, sq, h, d), k and v (b, sk, hk, d)."""
    ref, ref_lse = reference.attention_forward(q.double(), k.double(), v.double(), scale, causal)
    lowp = _lowp_attention(q, k, v, scale, causal)
    seen = torch.isfinite(ref_lse).transpose(1, 2)[..., None].expand_as(ref)  # (b, sq, h, d)
    failed = []
    if torch.isnan(out).any() or torch.isnan(lse).any():
        failed.append("NaN")
    err = (out.double() - ref).abs()[seen].max().item() if seen.any() else 0.0
    err_lp = (lowp.double() - ref).abs()[seen].max().item() if seen.any() else 0.0
    bound = 2 * err_lp + OUT_SLACK
    if not err <= bound:
        failed.append(f"out error {err:.2e} > {bound:.2e}")
    if (out.double()[~seen] != 0).any():
        failed.append("rows that see no key are not 0")
    finite = torch.isfinite(ref_lse)
    lse_excess = (lse.double() - ref_lse).abs() - (LSE_TOL + LSE_TOL * ref_lse.abs())
    if finite.any() and not (lse_excess[finite] <= 0).all():
        failed.append(f"lse error {lse_excess[finite].max().item() + LSE_TOL:.2e}")
    if not torch.equal(torch.isneginf(lse), ~finite):
        failed.append("lse -inf where a row sees keys, or finite where it sees none")
    return failed, err, bound


def _paged(k_cache, v_cache, rows, lengths, gen):
    """The keys rows[i][:lengths[i]] of contiguous caches in shuffled pages of PAGE keys (every
    other page row NaN): (k pages, v pages, block table)."""
    counts = [-(-n // PAGE) for n in lengths]
    order = torch.randperm(sum(counts) + 2, generator=gen).tolist()
    table = torch.full((len(lengths), max(counts) + 1), order[-1], dtype=torch.int32)
    shape = (len(order), PAGE) + tuple(k_cache.shape[2:])
    k_pages, v_pages = (torch.full(shape, math.nan, dtype=k_cache.dtype, device=k_cache.device)
                        for _ in range(2))
    for i, (row, n, count) in enumerate(zip(rows, lengths, counts)):
        for j in range(count):
            page = table[i, j] = order.pop(0)
            keys = slice(j * PAGE, min(n, (j + 1) * PAGE))
            k_pages[page, :keys.stop - keys.start] = k_cache[row, keys]
            v_pages[page, :keys.stop - keys.start] = v_cache[row, keys]
    return k_pages, v_pages, table.to(k_cache.device)


def check_sequences(dtype, d, causal, form, num_splits, gen):
    """check_case() for one call of sequences of their own lengths, sequence by sequence."""
    try:
        pieces = _sequence_call(dtype, d, causal, form, num_splits, gen)
    except RuntimeError as error:  # strict: the native path cannot serve it
        return False, math.inf, 0.0, "reference", num_splits, str(error)
    failed, worst = set(), (0.0, 1.0)
    for out, lse, q, k, v in pieces:
        why, err, bound = _verdict(out, lse, q, k, v, d ** -0.5, causal)
        failed.update(why)
        worst = max(worst, (err, bound), key=lambda eb: eb[0] / eb[1])
    return not failed, worst[0], worst[1], "native", num_splits, "; ".join(sorted(failed))


def _sequence_call(dtype, d, causal, form, num_splits, gen):
    """Runs one sequence call natively (strict=True raises RuntimeError where it cannot); (out,
    lse, q, k, v) of each sequence, with a batch dim of 1."""
    randn = lambda *shape: torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)
    options = dict(causal=causal, num_splits=num_splits, strict=True)
    pieces = (_varlen_call if form == "varlen" else _cache_call)(randn, d, form, options)
    torch.cuda.synchronize()
    return pieces


def _varlen_call(randn, d, form, options):
    from . import flash_attn_varlen_func

    h, hk = 8, 2
    q, k, v = randn(sum(Q_LENS), h, d), randn(sum(K_LENS), hk, d), randn(sum(K_LENS), hk, d)
    cu = lambda lens: torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32,
                                   device="cuda")
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu(Q_LENS), cu(K_LENS), max(Q_LENS),
                                         max(K_LENS), return_attn_probs=True, **options)
    pieces = []
    for i, (nq, nk) in enumerate(zip(Q_LENS, K_LENS)):
        q0, k0 = sum(Q_LENS[:i]), sum(K_LENS[:i])
        pieces.append((out[q0:q0 + nq][None], lse[:, q0:q0 + nq][None], q[q0:q0 + nq][None],
                       k[k0:k0 + nk][None], v[k0:k0 + nk][None]))
    return pieces


def _cache_call(randn, d, form, options):
    from . import flash_attn_with_kvcache

    h, hk = 8, 2
    q = randn(len(CACHE_LENS), CACHE_QUERIES, h, d)
    k_cache, v_cache = randn(3, CACHE_KEYS, hk, d), randn(3, CACHE_KEYS, hk, d)
    for row, n in zip(CACHE_ROWS, CACHE_LENS):
        k_cache[row, n:], v_cache[row, n:] = math.nan, math.nan
    lengths = torch.tensor(CACHE_LENS, dtype=torch.int32, device="cuda")
    if form == "paged kv cache":
        k_pages, v_pages, table = _paged(k_cache, v_cache, CACHE_ROWS, CACHE_LENS,
                                         torch.Generator().manual_seed(d))
        out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=lengths,
                                           block_table=table, return_softmax_lse=True, **options)
    else:
        rows = torch.tensor(CACHE_ROWS, dtype=torch.int32, device="cuda")
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                           cache_batch_idx=rows, return_softmax_lse=True,
                                           **options)
    return [(out[i:i + 1], lse[i:i + 1], q[i:i + 1], k_cache[row:row + 1, :n],
             v_cache[row:row + 1, :n]) for i, (row, n) in enumerate(zip(CACHE_ROWS, CACHE_LENS))]


def run_matrix(seed=0):
    """Every case of the matrix; yields (case, result)."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    head_dims = [d for d in HEAD_DIMS if d in _C.build_info()["head_dims"]]
    for (name, dtype), d, causal, (h, hk), (b, sq, sk), g in itertools.product(
            DTYPES.items(), head_dims, (False, True), HEADS, LENGTHS, SPLITS):
        case = dict(dtype=name, d=d, causal=causal, h=h, hk=hk, b=b, sq=sq, sk=sk, num_splits=g)
        yield case, check_case(dtype, d, causal, h, hk, b, sq, sk, g, gen)
    for (name, dtype), d, causal, form, g in itertools.product(
            DTYPES.items(), head_dims, (False, True), SEQUENCE_FORMS, SEQUENCE_SPLITS):
        case = dict(dtype=name, d=d, causal=causal, form=form, num_splits=g)
        yield case, check_sequences(dtype, d, causal, form, g, gen)


def _table(results):
    """One line per (dtype, d, causal, num_splits): cases, failures, worst error / bound."""
    groups = {}
    for case, (passed, err, bound, kernel, _g, _why) in results:
        key = (case.get("form", "dense"), case["dtype"], case["d"], case["causal"],
               case["num_splits"])
        row = groups.setdefault(key, [0, 0, 0.0, set()])
        row[0] += 1
        row[1] += 0 if passed else 1
        row[2] = max(row[2], err / bound if bound > 0 else math.inf)
        row[3].add(kernel)
    lines = [f"{'call':14} {'dtype':5} {'d':>4} {'causal':6} {'splits':>6} {'cases':>5} "
             f"{'failed':>6} {'worst err/bound':>15}  kernels"]
    for (form, dtype, d, causal, g), (n, bad, worst, kernels) in sorted(groups.items()):
        lines.append(f"{form:14} {dtype:5} {d:4d} {str(causal):6} {('auto' if g == 0 else g):>6} "
                     f"{n:5d} {bad:6d} {worst:15.3f}  {', '.join(sorted(kernels))}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m flashsplit.verify",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--device", type=int, default=0, help="CUDA/ROCm device index")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("flashsplit.verify: no GPU is visible to torch; nothing to verify")
        return 2
    if not _C.build_info()["gpu_kernels_built"]:
        print("flashsplit.verify: this build has no GPU kernels (built CPU-only); rebuild "
              "flashsplit with a CUDA or ROCm torch to verify them")
        return 2
    torch.cuda.set_device(args.device)
    identity = _stamp.device_identity(args.device)
    print(f"flashsplit.verify: {identity['gpu']} ({identity['arch']}), build "
          f"{_C.build_info()['build_id']}")
    # The kernels must run here even where the gate does not trust this GPU yet.
    os.environ["FLASHSPLIT_ALLOW_UNTESTED_ARCH"] = "1"
    results = list(run_matrix(args.seed))
    print(_table(results))
    failures = [(case, r) for case, r in results if not r[0]]
    for case, (_, _, _, kernel, g, why) in failures[:20]:
        print(f"FAILED {case} kernel={kernel} G={g}: {why}")
    path = _stamp.record(args.device, not failures, len(results))
    if failures:
        print(f"flashsplit.verify: {len(failures)} of {len(results)} cases FAILED; this GPU is "
              f"not admitted (any stamp of it and this build was removed from {path})")
        return 1
    print(f"flashsplit.verify: all {len(results)} cases passed; stamp written to {path}: the "
          f"gate now admits {identity['gpu']} ({identity['arch']}) with this build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
