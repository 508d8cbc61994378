"""Tensors past 2^31 elements run on the native kernels and stay exact.

The kernels address q, k, v, the output and the split scratch from 64-bit bases, so size alone
never sends a call to the reference path. Each case here holds more than 2^31 elements in k/v
or in q/out (4-9 GB per tensor) and is checked against a float32 reference computed in chunks
(over keys with an online log-sum-exp, or over sequences), so the reference fits beside them:
lse must match to 1e-3 relative (one key block lost or counted twice moves it by far more) and
out to 1% of its RMS. Skips where the GPU has too little free memory for a case.
"""

import math

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from test_gpu_common import (  # noqa: E402
    assert_native, fs_forward, full_fp32_matmuls, generator_for, requires_native)  # noqa: F401

TWO_31 = 2 ** 31


def chunked_reference(q, k, v, causal, key_chunk, batch_chunk):
    """(out, lse) in float32: GQA through a group axis (k and v are never repeated), keys in
    chunks folded by an online log-sum-exp, sequences in chunks."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    group = h // hk
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(b, sq, h, d, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, h, sq, dtype=torch.float32, device=q.device)
    for b0 in range(0, b, batch_chunk):
        qc = q[b0:b0 + batch_chunk].float().view(-1, sq, hk, group, d)
        bc = qc.shape[0]
        m = torch.full((bc, hk, group, sq), -math.inf, device=q.device)
        s_sum = torch.zeros(bc, hk, group, sq, device=q.device)
        acc = torch.zeros(bc, hk, group, sq, d, device=q.device)
        for k0 in range(0, sk, key_chunk):
            kc = k[b0:b0 + bc, k0:k0 + key_chunk].float()
            vc = v[b0:b0 + bc, k0:k0 + key_chunk].float()
            s = torch.einsum("bqhgd,bkhd->bhgqk", qc, kc) * scale
            if causal:
                rows = torch.arange(sq, device=q.device)[:, None]
                keys = torch.arange(k0, k0 + kc.shape[1], device=q.device)[None, :]
                s = s.masked_fill(keys > rows + sk - sq, -math.inf)
            new_m = torch.maximum(m, s.amax(-1))
            safe_m = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
            p = torch.exp(s - safe_m[..., None])
            rescale = torch.exp(m - safe_m)
            s_sum = s_sum * rescale + p.sum(-1)
            acc = acc * rescale[..., None] + torch.einsum("bhgqk,bkhd->bhgqd", p, vc)
            m = new_m
        o = acc / s_sum[..., None]
        out[b0:b0 + bc] = o.permute(0, 3, 1, 2, 4).reshape(bc, sq, h, d)
        lse[b0:b0 + bc] = (m + torch.log(s_sum)).reshape(bc, h, sq)
    return out, lse


def needs_free_bytes(nbytes):
    free, _ = torch.cuda.mem_get_info()
    if free < nbytes:
        pytest.skip(f"needs {nbytes / 2**30:.1f} GiB of free GPU memory, {free / 2**30:.1f} free")


def random_tensor(gen, shape, dtype):
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


def relative_error(out, ref, rows=1024):
    """|out - ref| / |ref| (Frobenius), a few sequences at a time."""
    err = norm = 0.0
    for b0 in range(0, out.shape[0], rows):
        err += (out[b0:b0 + rows].float() - ref[b0:b0 + rows]).square().sum().item()
        norm += ref[b0:b0 + rows].square().sum().item()
    return math.sqrt(err / norm)


def check_large_call(request, b, h, hk, sq, sk, d, causal, splits, key_chunk, batch_chunk):
    q_elems, kv_elems = b * sq * h * d, b * sk * hk * d
    assert max(q_elems, kv_elems) > TWO_31, "a case must pass 2^31 elements in q/out or k/v"
    # bf16 q, k, v and out, the float32 reference out, and room for the reference's chunks.
    needs_free_bytes(2 * (2 * q_elems + 2 * kv_elems) + 4 * q_elems + 6 * 2**30)
    gen = generator_for(request)
    q = random_tensor(gen, (b, sq, h, d), torch.bfloat16)
    k = random_tensor(gen, (b, sk, hk, d), torch.bfloat16)
    v = random_tensor(gen, (b, sk, hk, d), torch.bfloat16)
    ref, ref_lse = chunked_reference(q, k, v, causal, key_chunk, batch_chunk)
    for g in splits:
        what = f"(b,h,hk,sq,sk,d)={(b, h, hk, sq, sk, d)} causal={causal} num_splits={g}"
        decision = assert_native(q, k, v, causal=causal, num_splits=g)
        if g >= 2:
            assert decision["num_splits"] >= 2, f"{what}: runs G={decision['num_splits']}"
        out, lse = fs_forward(q, k, v, causal=causal, num_splits=g)
        assert not torch.isnan(out).any() and not torch.isnan(lse).any(), f"{what}: NaN"
        lse_excess = ((lse - ref_lse).abs() - (1e-3 + 1e-3 * ref_lse.abs())).max().item()
        assert lse_excess <= 0, f"{what}: lse off by {lse_excess:.3e} beyond its tolerance"
        rel = relative_error(out, ref)
        assert rel <= 1e-2, f"{what}: |out - ref| / |ref| = {rel:.3e}"
        del out, lse


@requires_native
def test_decode_with_kv_past_2_31_elements(request):
    """A GQA decode over 2M keys: k and v hold 2^31 + 2^21 elements each."""
    check_large_call(request, 1, 32, 8, 1, 2101248, 128, False, [0, 1],
                     key_chunk=262144, batch_chunk=1)


@requires_native
def test_split_prefill_with_kv_past_2_31_elements(request):
    """256 causal queries against 8.4M keys, split into producers and the combine."""
    check_large_call(request, 1, 16, 2, 256, 8388672, 128, True, [4],
                     key_chunk=16384, batch_chunk=1)


@requires_native
def test_many_sequences_with_q_and_out_past_2_31_elements(request):
    """16400 sequences of 128 tokens: q, k, v and out hold over 2^31 elements each."""
    check_large_call(request, 16400, 16, 16, 128, 128, 64, False, [0],
                     key_chunk=128, batch_chunk=512)


@requires_native
def test_decode_with_more_sequence_heads_than_a_grid_dimension(request):
    """8192 sequences x 8 k/v heads: more (batch, k/v head) pairs than a grid's z holds, and
    k/v past 2^31 elements."""
    check_large_call(request, 8192, 32, 8, 1, 300, 128, False, [0, 1, 3],
                     key_chunk=300, batch_chunk=512)
