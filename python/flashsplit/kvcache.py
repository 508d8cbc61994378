"""What flash_attn_with_kvcache does before it attends: rotary embedding of q and the new keys,
and the append of the new keys and values into the cache, in place, at each sequence's length.

Plain torch ops on tensors (no host reads of device values), so torch.compile traces them.
"""

import torch


def rotate(x, cos, sin, positions, interleaved):
    """x (b, s, heads, d) rotated over its first rotary_dim = 2 * cos.shape[1] dims at
    positions (b, s): GPT-J pairs (0, 1), (2, 3), ... when interleaved, else GPT-NeoX halves."""
    half = cos.shape[1]
    c = cos[positions].to(torch.float32)[:, :, None, :]  # (b, s, 1, rotary_dim / 2)
    s = sin[positions].to(torch.float32)[:, :, None, :]
    rot = x[..., :2 * half].to(torch.float32)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = rot[..., :half], rot[..., half:]
        rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((rotated.to(x.dtype), x[..., 2 * half:]), dim=-1)


def positions(cache_seqlens, length, per_row=True):
    """(b, length) positions cache_seqlens[i] + j, or cache_seqlens[i] for every j."""
    steps = torch.arange(length, device=cache_seqlens.device, dtype=torch.int64)
    base = cache_seqlens.to(torch.int64)[:, None]
    return base + steps[None, :] if per_row else base.expand(-1, length)


def append(cache, new, cache_seqlens, cache_batch_idx, block_table):
    """Writes new (b, s_new, hk, d) into cache at keys cache_seqlens[i] + j of each sequence i:
    of batch cache_batch_idx[i] (else i) of a contiguous cache, or through block_table's pages
    of a paged cache (pages, page_size, hk, d)."""
    b, s_new = new.shape[0], new.shape[1]
    keys = positions(cache_seqlens, s_new)
    if block_table is not None:
        page_size = cache.shape[1]
        pages = torch.gather(block_table.to(torch.int64), 1, keys // page_size)
        cache[pages, keys % page_size] = new
        return
    rows = torch.arange(b, device=new.device) if cache_batch_idx is None \
        else cache_batch_idx.to(torch.int64)
    cache[rows[:, None].expand(b, s_new), keys] = new
