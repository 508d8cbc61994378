"""Argument checks of the packed, varlen and kv-cache entry points.

Like _validate, every check raises before any work with a message that names the argument and
its value. The checks read shapes, dtypes and devices only, never a device value (that would
wait for the GPU on every call), so, as in flash-attn, the contents of cu_seqlens, seqused_k,
cache_seqlens and block_table are trusted: a reference-path call checks them when it reads them.
"""

import torch

from ._validate import (_is_int, check_float_tensor, check_heads, check_like_q,
                        check_same_shape)


def _shape(t):
    return tuple(t.shape)


def check_index(name, t, q, dims, rows=None):
    """An int32 index tensor of `dims` dims on q's device (rows: its first dim's size)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{name} must have {dims} dim{'s' if dims > 1 else ''}, "
                         f"got shape {_shape(t)}")
    if t.dtype != torch.int32:
        raise TypeError(f"{name}.dtype must be int32, got {t.dtype}")
    if t.device != q.device:
        raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    if rows is not None and t.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} entries along dim 0, got shape {_shape(t)}")


def check_max_seqlen(name, value):
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if not 0 <= value < (1 << 31):
        raise ValueError(f"{name} must be in [0, 2^31), got {value}")
    return int(value)


def check_packed(name, t, dims, pack_dim, count, layout):
    """qkv / kv: a float tensor with `count` slices along pack_dim."""
    check_float_tensor(name, t, dims, layout)
    if t.shape[pack_dim] != count:
        raise ValueError(f"{name} must have {count} at dim {pack_dim} {layout}, "
                         f"got shape {_shape(t)}")


def check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table):
    """q (total_q, h, d); k/v (total_k, hk, d), or pages (pages, page_size, hk, d) with
    block_table (b, pages per sequence)."""
    check_float_tensor("q", q, 3, "(total_q, h, d)")
    paged = block_table is not None
    layout = "(num_blocks, page_size, hk, d)" if paged else "(total_k, hk, d)"
    for name, t in (("k", k), ("v", v)):
        check_float_tensor(name, t, 4 if paged else 3, layout)
        check_like_q(name, t, q)
    check_same_shape("v", v, "k", k)
    check_heads(q, k, "q", "k")
    check_index("cu_seqlens_q", cu_seqlens_q, q, 1)
    if cu_seqlens_q.shape[0] < 1:
        raise ValueError("cu_seqlens_q must have b + 1 >= 1 entries, got shape (0,)")
    b = cu_seqlens_q.shape[0] - 1
    check_index("cu_seqlens_k", cu_seqlens_k, q, 1, rows=b + 1)
    if paged:
        check_index("block_table", block_table, q, 2, rows=b)
    check_max_seqlen("max_seqlen_q", max_seqlen_q)
    check_max_seqlen("max_seqlen_k", max_seqlen_k)


def check_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                  cache_batch_idx, cache_leftpad, block_table):
    """q (b, sq, h, d); caches (b_cache, s_cache, hk, d) or pages (pages, page_size, hk, d)
    with block_table (b, pages per sequence); new k/v (b, s_new, hk, d); cache_seqlens an int or
    int32 (b,); rotary_cos/sin (s_rotary, rotary_dim / 2)."""
    check_float_tensor("q", q, 4, "(b, sq, h, d)")
    paged = block_table is not None
    layout = "(num_blocks, page_size, hk, d)" if paged else "(b_cache, s_cache, hk, d)"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_float_tensor(name, t, 4, layout)
        check_like_q(name, t, q)
    check_same_shape("v_cache", v_cache, "k_cache", k_cache)
    check_heads(q, k_cache, "q", "k_cache")
    b = q.shape[0]
    if paged:
        check_index("block_table", block_table, q, 2, rows=b)
        if cache_batch_idx is not None:
            raise ValueError("cache_batch_idx and block_table exclude each other: a paged "
                             "cache finds each sequence's keys through its block_table row")
    if cache_batch_idx is not None:
        check_index("cache_batch_idx", cache_batch_idx, q, 1, rows=b)
    elif not paged and k_cache.shape[0] != b:
        raise ValueError(f"k_cache has batch {k_cache.shape[0]} but q has batch {b} "
                         "(pass cache_batch_idx to pick cache rows)")
    if cache_leftpad is not None:
        raise NotImplementedError("cache_leftpad is not supported; pass each sequence's keys "
                                  "from cache row 0")
    _check_cache_seqlens(cache_seqlens, q, b)
    _check_new_kv(q, k_cache, k, v, cache_seqlens)
    _check_rotary(q, rotary_cos, rotary_sin)


def _check_cache_seqlens(cache_seqlens, q, b):
    if cache_seqlens is None or isinstance(cache_seqlens, torch.Tensor):
        if cache_seqlens is not None:
            check_index("cache_seqlens", cache_seqlens, q, 1, rows=b)
        return
    if not _is_int(cache_seqlens):
        raise TypeError(f"cache_seqlens must be None, an int or an int32 tensor, "
                        f"got {cache_seqlens!r}")
    if not 0 <= cache_seqlens < (1 << 31):
        raise ValueError(f"cache_seqlens must be in [0, 2^31), got {cache_seqlens}")


def _check_new_kv(q, k_cache, k, v, cache_seqlens):
    if (k is None) != (v is None):
        raise ValueError("k and v are given together or not at all, got "
                         f"k {'None' if k is None else 'a tensor'} and "
                         f"v {'None' if v is None else 'a tensor'}")
    if k is None:
        return
    if cache_seqlens is None:
        raise ValueError("new k and v need cache_seqlens: where each sequence's keys end")
    for name, t in (("k", k), ("v", v)):
        check_float_tensor(name, t, 4, "(b, s_new, hk, d)")
        check_like_q(name, t, q)
        want = (q.shape[0], k.shape[1], k_cache.shape[2], k_cache.shape[3])
        if _shape(t) != want:
            raise ValueError(f"{name} must have shape (b, s_new, hk, d) = {want}, got {_shape(t)}")


def _check_rotary(q, cos, sin):
    if (cos is None) != (sin is None):
        raise ValueError("rotary_cos and rotary_sin are given together or not at all")
    if cos is None:
        return
    for name, t in (("rotary_cos", cos), ("rotary_sin", sin)):
        check_float_tensor(name, t, 2, "(s_rotary, rotary_dim / 2)")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    if _shape(sin) != _shape(cos):
        raise ValueError(f"rotary_sin must have the shape of rotary_cos {_shape(cos)}, "
                         f"got {_shape(sin)}")
    if not 0 < 2 * cos.shape[1] <= q.shape[-1]:
        raise ValueError(f"rotary_dim = 2 * rotary_cos.shape[1] = {2 * cos.shape[1]} must be "
                         f"in (0, head dim {q.shape[-1]}]")
