"""Inputs and independent references for the varlen and kv-cache tests (CPU and GPU).

The references run naive_attention per sequence on rows sliced by hand from the packed or paged
layouts, and rotate with complex multiplication, so they share no code with flashsplit.
"""

import torch

from accuracy import assert_within_tolerance, naive_pair

POISON = 1.0e4  # cache slots past a sequence's keys hold this; a read of one shows in out


def randn(shape, dtype, device, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def cu_seqlens(lengths, device):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


def varlen_inputs(q_lens, k_lens, h, hk, d, dtype, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = randn((sum(q_lens), h, d), dtype, device, gen)
    k = randn((sum(k_lens), hk, d), dtype, device, gen)
    v = randn((sum(k_lens), hk, d), dtype, device, gen)
    return q, k, v, cu_seqlens(q_lens, device), cu_seqlens(k_lens, device)


def to_pages(k, k_lens, page_size, gen, extra_pages=3, poison=POISON, min_width=1):
    """A paged copy of packed keys k (total_k, hk, d): (pages, page_size, hk, d) with pages in a
    random order and unused rows holding `poison`, and the block table (b, pages per
    sequence; at least min_width)."""
    per_seq = [(n + page_size - 1) // page_size for n in k_lens]
    width = max(min_width, max(per_seq))
    total = sum(per_seq) + extra_pages
    order = torch.randperm(total, generator=gen)
    pages = torch.full((total, page_size) + tuple(k.shape[1:]), poison, dtype=k.dtype,
                       device=k.device)
    table = torch.zeros((len(k_lens), width), dtype=torch.int32)
    start, used = 0, 0
    for i, n in enumerate(k_lens):
        for p in range(per_seq[i]):
            page = int(order[used])
            used += 1
            table[i, p] = page
            rows = k[start + p * page_size: start + min(n, (p + 1) * page_size)]
            pages[page, :rows.shape[0]] = rows
        # Unused entries point at a poisoned page: reading one shows in out.
        for p in range(per_seq[i], width):
            table[i, p] = int(order[total - 1])
        start += n
    return pages, table.to(k.device)


def naive_sequences(q, k, v, q_lens, k_lens, **kwargs):
    """Per sequence of packed q/k/v: ((out, lse) fp64, (out, lse) low precision) from
    naive_attention, with lse as (h, rows)."""
    results = []
    q0 = k0 = 0
    for i, (nq, nk) in enumerate(zip(q_lens, k_lens)):
        qi, ki, vi = (t[None] for t in (q[q0:q0 + nq], k[k0:k0 + nk], v[k0:k0 + nk]))
        slopes = kwargs.get("alibi_slopes")
        args = dict(kwargs)
        if slopes is not None and slopes.dim() == 2:
            args["alibi_slopes"] = slopes[i]
        results.append((q0, nq, naive_pair(qi, ki, vi, **args)))
        q0, k0 = q0 + nq, k0 + nk
    return results


def assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, what, **kwargs):
    """out (total_q, h, d) and lse (h, total_q) within flash-attn's tolerance per sequence."""
    for q0, nq, (high, low) in naive_sequences(q, k, v, q_lens, k_lens, **kwargs):
        if nq == 0:
            continue
        name = f"{what} rows [{q0}, {q0 + nq})"
        assert_within_tolerance(out[q0:q0 + nq][None], high[0], low[0], q.dtype, name + " out")
        assert_within_tolerance(lse[:, q0:q0 + nq][None], high[1], low[1], q.dtype,
                                name + " lse")


def rotate_complex(x, cos, sin, positions, interleaved):
    """x (b, s, heads, d) rotated at positions (b, s) by complex multiplication, in fp64."""
    half = cos.shape[1]
    x = x.double()
    angle = torch.polar(torch.ones_like(cos.double()), torch.atan2(sin.double(), cos.double()))
    turn = angle[positions][:, :, None, :]
    rot = x[..., :2 * half]
    if interleaved:
        z = torch.complex(rot[..., 0::2], rot[..., 1::2]) * turn
        rotated = torch.stack((z.real, z.imag), dim=-1).flatten(-2)
    else:
        z = torch.complex(rot[..., :half], rot[..., half:]) * turn
        rotated = torch.cat((z.real, z.imag), dim=-1)
    return torch.cat((rotated, x[..., 2 * half:]), dim=-1)


def rotary_tables(s, rotary_dim, device, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)
