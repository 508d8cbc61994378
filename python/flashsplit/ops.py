"""The torch.library ops behind flash_attn_func, and their autograd.

flashsplit::fwd decides native vs reference inside its implementation, so torch.compile sees
one opaque op (through the fake impl) and traces flash_attn_func without graph breaks.
flashsplit::bwd is always the reference backward, recomputing P from the saved lse.
"""

from typing import Optional, Tuple

import torch

from . import _native, autotune, reference


def _strict_error(reason):
    return RuntimeError(
        f"flashsplit: the native path cannot serve this call: {reason} "
        "(strict=True or FLASHSPLIT_STRICT=1 forbids the reference fallback)")


@torch.library.custom_op("flashsplit::fwd", mutates_args=())
def attn_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
             causal: bool, window_left: int, window_right: int, softcap: float,
             alibi_slopes: Optional[torch.Tensor], dropout_p: float, dropout_seed: int,
             num_splits: int, strict: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    decision = _native.gate_decision(q, k, v, causal, dropout_p, window_left, window_right,
                                     softcap, alibi_slopes is not None, num_splits)
    if decision["path"] == "native":
        if num_splits == 0 and autotune.enabled():
            # Only "auto" is tuned: an explicit num_splits is the caller's decision.
            num_splits = autotune.choose_num_splits(q, k, v, softmax_scale, causal, decision)
        return _native.native_forward(q, k, v, softmax_scale, causal, num_splits)
    if strict or _native.strict_from_env():
        raise _strict_error(decision["reason"])
    return reference.attention_forward(q, k, v, softmax_scale, causal, window_left,
                                       window_right, softcap, alibi_slopes, dropout_p,
                                       dropout_seed)


@attn_fwd.register_fake
def _attn_fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                   alibi_slopes, dropout_p, dropout_seed, num_splits, strict):
    b, sq, h, _ = q.shape
    out = q.new_empty(q.shape)
    lse = q.new_empty((b, h, sq), dtype=reference.compute_dtype(q.dtype))
    return out, lse


@torch.library.custom_op("flashsplit::bwd", mutates_args=())
def attn_bwd(dout: torch.Tensor, dlse: Optional[torch.Tensor], q: torch.Tensor,
             k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor, softmax_scale: float,
             causal: bool, window_left: int, window_right: int, softcap: float,
             alibi_slopes: Optional[torch.Tensor], dropout_p: float,
             dropout_seed: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return reference.attention_backward(dout, dlse, q, k, v, lse, softmax_scale, causal,
                                        window_left, window_right, softcap, alibi_slopes,
                                        dropout_p, dropout_seed)


@attn_bwd.register_fake
def _attn_bwd_fake(dout, dlse, q, k, v, lse, softmax_scale, causal, window_left, window_right,
                   softcap, alibi_slopes, dropout_p, dropout_seed):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
     dropout_p, dropout_seed, _num_splits, _strict) = inputs
    _, lse = output
    ctx.save_for_backward(q, k, v, lse, alibi_slopes)
    ctx.options = (softmax_scale, causal, window_left, window_right, softcap)
    ctx.dropout = (dropout_p, dropout_seed)


def _backward(ctx, dout, dlse):
    q, k, v, lse, alibi_slopes = ctx.saved_tensors
    softmax_scale, causal, window_left, window_right, softcap = ctx.options
    dropout_p, dropout_seed = ctx.dropout
    if dout is None:
        dout = torch.zeros_like(q)
    dq, dk, dv = attn_bwd(dout, dlse, q, k, v, lse, softmax_scale, causal, window_left,
                          window_right, softcap, alibi_slopes, dropout_p, dropout_seed)
    # No gradient for the options, the slopes (flash-attn gives none either) or the seed.
    return (dq, dk, dv) + (None,) * 10


torch.library.register_autograd("flashsplit::fwd", _backward, setup_context=_setup_context)
