"""python -m flashsplit.verify: check flashsplit's native kernels on this GPU, and admit it.

Runs the correctness matrix on the local GPU: bf16 and fp16, every head dim built, causal and
not, MHA / GQA / MQA, query and key lengths from 1 through odd to long, every split mode (no
split, the heuristic's G, a forced G and so the combine), and rows that see no key. Each native
result is compared with a float64 reference: a case passes when its error is at most twice the
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
    return not failed, err, bound, plan["kernel"], plan["num_splits"], "; ".join(failed)


def run_matrix(seed=0):
    """Every case of the matrix; yields (case, result)."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    head_dims = [d for d in HEAD_DIMS if d in _C.build_info()["head_dims"]]
    for (name, dtype), d, causal, (h, hk), (b, sq, sk), g in itertools.product(
            DTYPES.items(), head_dims, (False, True), HEADS, LENGTHS, SPLITS):
        case = dict(dtype=name, d=d, causal=causal, h=h, hk=hk, b=b, sq=sq, sk=sk, num_splits=g)
        yield case, check_case(dtype, d, causal, h, hk, b, sq, sk, g, gen)


def _table(results):
    """One line per (dtype, d, causal, num_splits): cases, failures, worst error / bound."""
    groups = {}
    for case, (passed, err, bound, kernel, _g, _why) in results:
        key = (case["dtype"], case["d"], case["causal"], case["num_splits"])
        row = groups.setdefault(key, [0, 0, 0.0, set()])
        row[0] += 1
        row[1] += 0 if passed else 1
        row[2] = max(row[2], err / bound if bound > 0 else math.inf)
        row[3].add(kernel)
    lines = [f"{'dtype':5} {'d':>4} {'causal':6} {'splits':>6} {'cases':>5} {'failed':>6} "
             f"{'worst err/bound':>15}  kernels"]
    for (dtype, d, causal, g), (n, bad, worst, kernels) in sorted(groups.items()):
        lines.append(f"{dtype:5} {d:4d} {str(causal):6} {('auto' if g == 0 else g):>6} {n:5d} "
                     f"{bad:6d} {worst:15.3f}  {', '.join(sorted(kernels))}")
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
