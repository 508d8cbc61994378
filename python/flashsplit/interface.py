"""The user API: flash_attn_func and its packed forms (flash-attn's signatures plus
num_splits/strict), explain and reference_attention."""

import torch

from . import _native, ops, reference
from ._dispatch import direct_call_ok
from ._validate import check_options, check_qkv, flag
from ._validate_sequences import check_packed

# Dropout seeds stay below 2**62 so they fit the op schema's int64 with room to spare.
_SEED_BOUND = 1 << 62


def checked_options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                    num_splits, batch=None):
    """Validates the options of a call whose tensors passed their checks; returns
    (softmax_scale, causal, window_left, window_right). batch: the call's sequences where q's
    first dim is not (varlen)."""
    options = check_options(q, dropout_p, softmax_scale, causal, window_size, softcap,
                            alibi_slopes, num_splits, batch=batch)
    if softmax_scale is None:
        softmax_scale = reference.default_softmax_scale(q.shape[-1])
    return (float(softmax_scale),) + options


def _checked_options(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                     alibi_slopes, num_splits):
    """Validates everything and returns (softmax_scale, causal, window_left, window_right)."""
    check_qkv(q, k, v)
    return checked_options(q, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, num_splits)


def flags(deterministic, return_attn_probs, strict):
    return (flag("deterministic", deterministic), flag("return_attn_probs", return_attn_probs),
            flag("strict", strict))


def draw_dropout_seed(dropout_p):
    # Drawn from torch's default generator so torch.manual_seed makes dropout reproducible; the
    # backward regenerates the same mask from this seed.
    if dropout_p == 0.0:
        return 0
    return int(torch.randint(0, _SEED_BOUND, (1,)).item())


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False, *, num_splits=0, strict=False):
    """Exact attention, flash-attn's API. q (b, sq, h, d), k/v (b, sk, hk, d), h % hk == 0.

    Returns out (b, sq, h, d) like q, or (out, lse, None) when return_attn_probs; lse is
    (b, h, sq), fp32 (fp64 for fp64 inputs). Differentiable w.r.t. q, k, v (also through lse).

    num_splits: 0 lets the heuristic choose, 1 disables split-KV, G >= 2 forces G splits
    (clamped) when the native path runs. strict=True (or FLASHSPLIT_STRICT=1) raises
    RuntimeError with the gate's reason instead of falling back to the reference path.
    deterministic is accepted for compatibility; the backward is deterministic anyway.
    """
    softmax_scale, causal, window_left, window_right = _checked_options(
        q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
        num_splits)
    _, return_attn_probs, strict = flags(deterministic, return_attn_probs, strict)
    fwd = ops.attn_fwd_impl if direct_call_ok(q, k, v, alibi_slopes) else ops.attn_fwd
    out, lse = fwd(q, k, v, softmax_scale, causal, window_left, window_right, float(softcap),
                   alibi_slopes, float(dropout_p), draw_dropout_seed(dropout_p), int(num_splits),
                   strict)
    if return_attn_probs:
        # flash-attn's third value is the dropout/probability matrix, which is never built here.
        return out, lse, None
    return out


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False, *, num_splits=0,
                              strict=False):
    """flash_attn_func on qkv (b, s, 3, h, d) stacked q, k, v (gradients flow into qkv)."""
    check_packed("qkv", qkv, 5, 2, 3, "(b, s, 3, h, d)")
    q, k, v = qkv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs,
                           num_splits=num_splits, strict=strict)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False, *, num_splits=0,
                             strict=False):
    """flash_attn_func on q (b, sq, h, d) and kv (b, sk, 2, hk, d) stacked k, v."""
    check_packed("kv", kv, 5, 2, 2, "(b, sk, 2, hk, d)")
    k, v = kv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs,
                           num_splits=num_splits, strict=strict)


def explain(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
            softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False, *,
            num_splits=0, strict=False):
    """What flash_attn_func would do with these arguments, without computing anything.

    Returns {"path": "native" | "reference", "kernel": "hopper_wgmma" | "portable_mma" |
    "reference", "num_splits": G, "reason": why the gate refused ("" on the native path),
    "details": {...}}. details is the plan's kernel internals on the native path ({} on the
    reference path): the tile shape (block_m, block_n; packs_heads, whether a tile's rows hold a
    GQA group's query heads; page_rows, whether Hopper tiles copy a paged cache's key blocks a
    row at a time, its pages too small for TMA boxes; split_block_n, the keys per block of the
    tiles calls with G >= 2 run, which clamp G; key_warps, the warps of a portable block that
    share its rows, each over its part of every key block, 0 on Hopper tiles; staggered_kv,
    whether those blocks copy a key block's K and V apart, K after S and V after P V),
    grid_blocks (thread blocks per split) and
    blocks_per_sm, the Hopper walk (persistent, carry, rotate_rounds, tile_counter, tile_group)
    and softmax (running_max: causal tiles take probabilities at the running max),
    the tail split (tail_tiles, tail_parts) and the launches (forward_grid, tail_grid,
    combine_grid as (x, y, z) blocks, combine_lanes). It is the plan the native forward runs. Same
    validation (and the same errors) as flash_attn_func; strict does not raise here.
    """
    _, causal, window_left, window_right = _checked_options(
        q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
        num_splits)
    flags(deterministic, return_attn_probs, strict)
    return _native.gate_decision(q, k, v, causal, dropout_p, window_left, window_right,
                                 softcap, alibi_slopes is not None, int(num_splits))


def reference_attention(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                        window_size=(-1, -1), softcap=0.0, alibi_slopes=None, *,
                        dropout_seed=0):
    """The fallback path's math, called directly: returns (out, lse), never the native kernels.

    Forward only (plain torch ops, so autograd can follow it, but flash_attn_func's backward is
    the memory-bounded one). dropout_seed picks the keep mask deterministically.
    """
    softmax_scale, causal, window_left, window_right = _checked_options(
        q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, 0)
    return reference.attention_forward(q, k, v, softmax_scale, causal, window_left,
                                       window_right, float(softcap), alibi_slopes,
                                       float(dropout_p), int(dropout_seed))
