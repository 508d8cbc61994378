"""Helpers shared by the GPU test modules (test_gpu_*.py), and the checks that the build under
test really is the native one: without them every native-path test could be passing on the
reference fallback.

Tolerance rule (flash-attn's, from its tests/test_flash_attn.py): a result passes when
    max |result - fp32 reference| <= 2 * max |same math in the inputs' precision - fp32 ref| + 1e-3
over the entries that see at least one key. The 1e-3 absolute slack covers rows where the
low-precision torch computation is (nearly) exact, e.g. sk == 1 (out = v) or a row dominated by
one key: there 2 * err_lowp is ~0, and a legitimate difference in the kernel's fp32
accumulation order that flips one final rounding would fail (one bf16 ulp is 2^-7 relative,
~1e-3 at |out| ~ 0.125; one fp16 ulp is 2^-10). It stays an order of magnitude below what real
bugs do: a wrong mask, a dropped or doubled key block or a bad combine weight moves outputs of
unit-variance inputs by >= 1e-2.
lse is compared in fp32: |lse - ref| <= 1e-3 + 1e-3 * |ref|; the kernel computes scores from
the same bf16/fp16 values in fp32, so only summation order separates it from the reference.
"""

import math
import os
import zlib

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashsplit  # noqa: E402
from flashsplit import _C, _native  # noqa: E402
from flashsplit.sequences import Sequences  # noqa: E402
from naive_attention import naive_attention  # noqa: E402

DTYPES = [torch.bfloat16, torch.float16]
DTYPE_IDS = ["bf16", "fp16"]
OUT_SLACK = 1e-3
LSE_ATOL = 1e-3
LSE_RTOL = 1e-3

_PROPS = torch.cuda.get_device_properties(0)
ON_ROCM = bool(getattr(torch.version, "hip", None))
# The NVIDIA compute capability (0 on AMD GPUs, whose arch is ARCH).
DEVICE_CC = 0 if ON_ROCM else _PROPS.major * 10 + _PROPS.minor
ARCH = str(getattr(_PROPS, "gcnArchName", "")).split(":")[0] if ON_ROCM else f"sm_{DEVICE_CC}"
BUILD_INFO = dict(_C.build_info())
# The family the plain calls below run on this GPU: the MFMA kernels on AMD, else mma.sync.
PORTABLE = "portable_mfma" if ON_ROCM else "portable_mma"


def hbm_bytes_per_us(props):
    """The device's HBM peak as the plan reads it: two transfers a memory clock (kHz) over the
    bus (bits)."""
    return 2.0 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8 / 1e6


def hbm_share_over_h100(props):
    """The HBM bandwidth each SM of the device gets over the H100's, 3.35 TB/s over 132 SMs
    (core/problem.h)."""
    return hbm_bytes_per_us(props) / props.multi_processor_count / (2619e3 * 5120 / 4000 / 132)


def _admitted():
    """(whether the gate admits this GPU, its verdict for a plain call)."""
    q = torch.ones(1, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    decision = flashsplit.explain(q, q, q)
    return decision["path"] == "native", decision


NATIVE_ADMITTED, _PLAIN_CALL = _admitted()

# On the H100 (cc 9.0) the native tests must run; test_build_admits_this_gpu fails loudly if the
# build does not admit it. Elsewhere the gate admits a GPU once `python -m flashsplit.verify`
# passed on it (or FLASHSPLIT_ALLOW_UNTESTED_ARCH=1); until then the native tests skip with the
# gate's reason.
requires_native = pytest.mark.skipif(
    not NATIVE_ADMITTED,
    reason=f"native kernels not admitted on {ARCH}: {_PLAIN_CALL['reason']}")


@pytest.fixture(autouse=True)
def full_fp32_matmuls():
    """The fp32 references must be real fp32: TF32 would add ~1e-3 errors to the reference."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(params=["as_shipped", "portable"])
def family(request, monkeypatch):
    """The kernels a test runs on: as the build chooses them, or the portable ones (the Hopper
    kernels disabled with FLASHSPLIT_DISABLE_HOPPER=1)."""
    if request.param == "portable":
        monkeypatch.setenv("FLASHSPLIT_DISABLE_HOPPER", "1")
    return request.param


def generator_for(request):
    """A CUDA generator seeded from the test's id: fresh random data per test, reproducible."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    return gen


def rand_qkv(gen, b, sq, sk, h, hk, d, dtype):
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    return q, k, v


def fs_forward(q, k, v, causal=False, num_splits=0, **kwargs):
    """(out, lse) through the public API."""
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=num_splits,
                                             return_attn_probs=True, **kwargs)
    return out, lse


def assert_native(q, k, v, causal=False, num_splits=0):
    """explain() must say native: a silent fallback would otherwise pass every accuracy test."""
    decision = flashsplit.explain(q, k, v, causal=causal, num_splits=num_splits)
    assert decision["path"] == "native", f"expected the native path, got {decision}"
    assert decision["kernel"] != "reference", decision
    return decision


def varlen_decision(q, k, v, cu_q, cu_k, q_lens, k_lens, causal, num_splits):
    """explain()'s decision for flash_attn_varlen_func on packed q, k, v (total rows, heads, d)
    of sequences q_lens / k_lens long."""
    seqs = Sequences(cu_q, cu_k, max_seqlen_q=max(q_lens), max_seqlen_k=max(k_lens))
    return _native.sequence_gate_decision(q[None], k[None], v[None], seqs, causal, num_splits)


def key_blocks(sk, block_n):
    return math.ceil(sk / block_n)


def references(q, k, v, causal=False, **kwargs):
    """((out, lse) fp32 from upcast inputs, out computed in the inputs' own precision)."""
    out32, lse32 = naive_attention(q.float(), k.float(), v.float(), causal=causal, **kwargs)
    out_lp, _ = naive_attention(q, k, v, causal=causal, **kwargs)
    return out32, lse32.float(), out_lp


def empty_row_count(sq, sk, causal):
    """Bottom-right causal: query i sees no key iff i + sk - sq < 0, i.e. the first sq - sk rows."""
    return max(0, sq - sk) if causal else 0


def max_abs_error(actual, ref):
    diff = (actual.float() - ref.float()).abs()
    if diff.numel() == 0:
        return 0.0
    if torch.isnan(diff).any():
        return math.inf
    return diff.max().item()


def assert_out_close(out, ref32, out_lp, what, rows=None):
    """The 2x rule (module docstring) on out (b, sq, h, d); rows selects query rows."""
    if rows is not None:
        out, ref32, out_lp = out[:, rows], ref32[:, rows], out_lp[:, rows]
    assert not torch.isnan(out).any(), f"{what}: NaN in out"
    assert torch.isfinite(out).all(), f"{what}: inf in out"
    err = max_abs_error(out, ref32)
    # Low-precision torch may overflow/NaN where the kernel (fp32 inside) does not; such
    # entries say nothing about the achievable error, so they are left out of the scale.
    lp_diff = (out_lp.float() - ref32).abs()
    err_lp = lp_diff[torch.isfinite(lp_diff)].max().item() if lp_diff.numel() else 0.0
    bound = 2 * err_lp + OUT_SLACK
    assert err <= bound, (f"{what}: max |out - fp32 ref| = {err:.3e} > {bound:.3e} "
                          f"(= 2 * {err_lp:.3e} low-precision torch error + {OUT_SLACK})")


def assert_lse_close(lse, ref_lse, what, rows=None):
    """lse (b, h, sq) fp32 against the fp32 reference; rows selects query rows."""
    assert lse.dtype == torch.float32, f"{what}: lse dtype {lse.dtype}, expected float32"
    if rows is not None:
        lse, ref_lse = lse[:, :, rows], ref_lse[:, :, rows]
    assert torch.isfinite(lse).all(), f"{what}: non-finite lse where the row sees keys"
    excess = (lse - ref_lse).abs() - (LSE_ATOL + LSE_RTOL * ref_lse.abs())
    worst = excess.max().item() if excess.numel() else -1.0
    assert worst <= 0, (f"{what}: lse off by up to {worst + LSE_ATOL:.3e} beyond "
                        f"atol {LSE_ATOL} + rtol {LSE_RTOL} * |ref|")


def assert_matches_reference(out, lse, q, k, refs, causal, what):
    """Shapes/dtypes, empty rows exactly (0, -inf), then the tolerance rule on the others."""
    ref32, ref_lse, out_lp = refs
    b, sq, h, _ = q.shape
    assert out.shape == ref32.shape and out.dtype == q.dtype, \
        f"{what}: out {tuple(out.shape)} {out.dtype}, expected {tuple(ref32.shape)} {q.dtype}"
    assert lse.shape == (b, h, sq), f"{what}: lse shape {tuple(lse.shape)} != {(b, h, sq)}"
    n_empty = empty_row_count(sq, k.shape[1], causal)
    if n_empty:
        assert (out[:, :n_empty] == 0).all(), f"{what}: rows that see no key must be exactly 0"
        assert torch.isneginf(lse[:, :, :n_empty]).all(), \
            f"{what}: rows that see no key must have lse == -inf"
    rows = slice(n_empty, sq)
    assert_out_close(out, ref32, out_lp, what, rows)
    assert_lse_close(lse, ref_lse, what, rows)


def poison_caching_allocator(byte_sizes, copies=3):
    """Fills freed caching-allocator blocks of these sizes with 0xFF bytes (NaN in fp16, bf16 and
    fp32), so tensors the next call allocates start as NaN unless the kernels write them."""
    blocks = []
    for size in byte_sizes:
        for _ in range(copies):
            blocks.append(torch.full((max(1, int(size)),), 0xFF, dtype=torch.uint8,
                                     device="cuda"))
    # Freed (not released to the driver): the next allocations of these sizes reuse them.
    del blocks


# ------------------------------------------------------------------------------ build checks

def test_build_has_gpu_kernels_and_both_head_dims():
    assert BUILD_INFO.get("gpu_kernels_built") is True, f"build_info={BUILD_INFO}"
    assert {64, 128} <= set(BUILD_INFO.get("head_dims", [])), f"build_info={BUILD_INFO}"


def test_build_admits_this_gpu():
    if DEVICE_CC != 90:
        pytest.skip(f"only the H100 (cc 9.0) is required to be admitted; this GPU is cc {DEVICE_CC}")
    assert 90 in BUILD_INFO.get("archs", []), f"built without sm_90: {BUILD_INFO}"
    assert 90 in BUILD_INFO.get("tested_archs", []), f"cc 9.0 is not admitted: {BUILD_INFO}"


@requires_native
def test_explain_says_native_for_a_plain_bf16_call():
    q = torch.randn(1, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 32, 2, 64, device="cuda", dtype=torch.bfloat16)
    decision = assert_native(q, k, k)
    assert decision["reason"] == "", decision
    assert decision["details"]["block_m"] > 0 and decision["details"]["block_n"] > 0, decision


HOPPER_FORCED_OFF = os.environ.get("FLASHSPLIT_DISABLE_HOPPER") == "1"
# The tests of the Hopper kernels' own choices: they run on cc 9.0 builds with sm_90a, unless
# FLASHSPLIT_DISABLE_HOPPER=1 hands every call to the portable kernels.
requires_hopper = pytest.mark.skipif(
    DEVICE_CC != 90 or HOPPER_FORCED_OFF or not BUILD_INFO.get("hopper_kernels_built"),
    reason=f"the Hopper kernels do not run here (cc {DEVICE_CC}, "
           f"FLASHSPLIT_DISABLE_HOPPER={int(HOPPER_FORCED_OFF)}, sm_90a built: "
           f"{bool(BUILD_INFO.get('hopper_kernels_built'))})")


@requires_native
def test_long_sequences_run_the_hopper_kernels_unless_disabled(request):
    """On the H100 the suite runs twice (scripts/gpu_check.sh): as shipped, where the Hopper
    kernels must serve long sequences, and with FLASHSPLIT_DISABLE_HOPPER=1, where the portable
    kernels must serve everything. Either run would pass vacuously on the wrong path."""
    q, k, v = rand_qkv(generator_for(request), 1, 512, 512, 4, 4, 128, torch.bfloat16)
    decision = assert_native(q, k, v)
    if HOPPER_FORCED_OFF or DEVICE_CC != 90:
        assert decision["kernel"] == PORTABLE, decision
    else:
        assert BUILD_INFO.get("hopper_kernels_built"), f"no sm_90a kernels in {BUILD_INFO}"
        assert decision["kernel"] == "hopper_wgmma", decision
        assert decision["details"]["block_n"] == 128, decision


@requires_native
def test_decode_runs_the_portable_narrow_tile(request):
    q, k, v = rand_qkv(generator_for(request), 2, 1, 4096, 32, 8, 128, torch.bfloat16)
    decision = assert_native(q, k, v)
    assert decision["kernel"] == PORTABLE, decision
    assert decision["details"]["block_m"] == 16, decision
