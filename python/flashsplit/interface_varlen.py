"""flash-attn's variable-length entry points: sequences packed one after another along the
first dim, cu_seqlens giving where each starts (int32, b + 1 entries, from 0), plus the
keyword-only num_splits and strict of flash_attn_func."""

from . import ops
from ._dispatch import direct_call_ok
from ._validate_sequences import check_packed, check_varlen
from .interface import checked_options, draw_dropout_seed, flags


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None, *,
                           num_splits=0, strict=False):
    """Exact attention over b sequences of their own lengths.

    q (total_q, h, d): sequence i's queries are rows [cu_seqlens_q[i], cu_seqlens_q[i + 1]);
    k/v (total_k, hk, d) likewise with cu_seqlens_k, or a paged cache
    (num_blocks, page_size, hk, d) with block_table (b, pages per sequence), int32: key j of
    sequence i is row j % page_size of page block_table[i, j // page_size], and cu_seqlens_k
    still gives the key counts. max_seqlen_q/max_seqlen_k are the longest sequence's (they size
    the grid, as in flash-attn, and must not be less). Causal masks align each sequence's
    queries to the end of its own keys. Returns out (total_q, h, d), or (out, lse, None) with
    lse (h, total_q) when return_attn_probs. Differentiable w.r.t. q, k, v (also paged).
    """
    check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table)
    b = cu_seqlens_q.shape[0] - 1
    softmax_scale, causal, window_left, window_right = checked_options(
        q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, num_splits,
        batch=b)
    _, return_attn_probs, strict = flags(deterministic, return_attn_probs, strict)
    paged = block_table is not None
    k4, v4 = (k, v) if paged else (k.unsqueeze(0), v.unsqueeze(0))
    direct = direct_call_ok(q, k, v, cu_seqlens_q, cu_seqlens_k, block_table, alibi_slopes)
    fwd = ops.seq_fwd_impl if direct else ops.seq_fwd
    out, lse = fwd(q.unsqueeze(0), k4, v4, cu_seqlens_q, cu_seqlens_k, None, None, block_table,
                   int(max_seqlen_q), int(max_seqlen_k), softmax_scale, causal, window_left,
                   window_right, float(softcap), alibi_slopes, float(dropout_p),
                   draw_dropout_seed(dropout_p), int(num_splits), strict)
    out, lse = out[0], lse[0]
    return (out, lse, None) if return_attn_probs else out


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False, *, num_splits=0, strict=False):
    """flash_attn_varlen_func on qkv (total, 3, h, d) stacked q, k, v of the same sequences."""
    check_packed("qkv", qkv, 4, 1, 3, "(total, 3, h, d)")
    q, k, v = qkv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs,
                                  num_splits=num_splits, strict=strict)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False, *, num_splits=0, strict=False):
    """flash_attn_varlen_func on q (total_q, h, d) and kv (total_k, 2, hk, d) stacked k, v."""
    check_packed("kv", kv, 4, 1, 2, "(total_k, 2, hk, d)")
    k, v = kv.unbind(1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dropout_p, softmax_scale, causal, window_size,
                                  softcap, alibi_slopes, deterministic, return_attn_probs,
                                  num_splits=num_splits, strict=strict)
