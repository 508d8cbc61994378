"""flash-attn's flash_attn_with_kvcache: attention of new queries against a kv cache of per-
sequence lengths, appending the new keys and values into the cache first."""

import torch

from . import kvcache, ops
from ._dispatch import direct_call_ok
from ._validate import flag
from ._validate_sequences import check_kvcache
from .interface import checked_options


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False, *, strict=False):
    """Decode and chunked prefill against a kv cache, flash-attn's signature plus strict.

    q (b, sq, h, d). k_cache/v_cache (b_cache, s_cache, hk, d), or a paged cache
    (num_blocks, page_size, hk, d) with block_table (b, pages per sequence), int32: key j of
    sequence i is row j % page_size of page block_table[i, j // page_size]. cache_seqlens (an
    int, or int32 (b,)) is each sequence's key count before this call (None: the whole cache);
    cache_batch_idx (int32 (b,)) picks each sequence's batch of a contiguous cache.

    New k/v (b, s_new, hk, d), when given, are written into the cache in place at keys
    cache_seqlens[i] + j before attending. rotary_cos/rotary_sin (s_rotary, rotary_dim / 2)
    rotate the new keys at those positions and q at cache_seqlens[i] + row with causal or a
    window, at cache_seqlens[i] otherwise; rotary_interleaved picks GPT-J pairs over GPT-NeoX
    halves. Causal masks align q's rows to the end of each sequence's keys. num_splits as in
    flash_attn_func. Returns out (b, sq, h, d), or (out, lse (b, h, sq)) with return_softmax_lse.
    Forward only, as in flash-attn.
    """
    check_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                  cache_batch_idx, cache_leftpad, block_table)
    softmax_scale, causal, window_left, window_right = checked_options(
        q, 0.0, softmax_scale, causal, window_size, softcap, alibi_slopes, num_splits)
    rotary_interleaved = flag("rotary_interleaved", rotary_interleaved)
    return_softmax_lse = flag("return_softmax_lse", return_softmax_lse)
    strict = flag("strict", strict)
    b, sq = q.shape[0], q.shape[1]
    paged = block_table is not None
    max_seqlen_k = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    if cache_seqlens is None:
        cache_seqlens = max_seqlen_k
    if not isinstance(cache_seqlens, torch.Tensor):
        cache_seqlens = torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
    seqused_k = cache_seqlens
    if k is not None:
        if rotary_cos is not None:
            k = kvcache.rotate(k, rotary_cos, rotary_sin,
                               kvcache.positions(cache_seqlens, k.shape[1]), rotary_interleaved)
        kvcache.append(k_cache, k, cache_seqlens, cache_batch_idx, block_table)
        kvcache.append(v_cache, v, cache_seqlens, cache_batch_idx, block_table)
        seqused_k = (cache_seqlens + k.shape[1]).to(torch.int32)
    if rotary_cos is not None:
        per_row = causal or window_left >= 0 or window_right >= 0
        q = kvcache.rotate(q, rotary_cos, rotary_sin,
                           kvcache.positions(cache_seqlens, sq, per_row), rotary_interleaved)
    direct = direct_call_ok(q, k_cache, v_cache, seqused_k, cache_batch_idx, block_table,
                            alibi_slopes)
    fwd = ops.seq_fwd_impl if direct else ops.seq_fwd
    out, lse = fwd(q, k_cache, v_cache, None, None, seqused_k, cache_batch_idx, block_table, sq,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right,
                   float(softcap), alibi_slopes, 0.0, 0, int(num_splits), strict)
    return (out, lse) if return_softmax_lse else out
