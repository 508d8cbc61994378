"""The torch.library ops behind the entry points, and their autograd.

flashsplit::fwd (dense calls) and flashsplit::seq_fwd (varlen and kv-cache calls) decide native
vs reference inside their implementations, so torch.compile sees one opaque op each (through
the fake impls) and traces the entry points without graph breaks. The backward ops are always
the reference backward, recomputing P from the saved lse. The implementations are also called
directly where the dispatcher has nothing to add (_dispatch.py).
"""

from typing import Optional, Tuple

import torch

from . import _native, autotune, reference, sequences


def _native_or_reference(result, strict, reference_forward):
    """result: what _native.run gave, (out, lse) or the gate's reason. A reason is the reference
    path's call (reference_forward()), or its error with strict."""
    if not isinstance(result, str):
        return result
    if strict or _native.strict_from_env():
        raise RuntimeError(
            f"flashsplit: the native path cannot serve this call: {result} "
            "(strict=True or FLASHSPLIT_STRICT=1 forbids the reference fallback)")
    return reference_forward()


def attn_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
                  causal: bool, window_left: int, window_right: int, softcap: float,
                  alibi_slopes: Optional[torch.Tensor], dropout_p: float, dropout_seed: int,
                  num_splits: int, strict: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """flashsplit::fwd's implementation: the native kernels where the gate admits the call, the
    reference path otherwise (or the gate's reason as an error with strict)."""
    if num_splits == 0 and autotune.enabled():
        decision = _native.gate_decision(q, k, v, causal, dropout_p, window_left, window_right,
                                         softcap, alibi_slopes is not None, num_splits)
        if decision["path"] == "native":
            # Only "auto" is tuned: an explicit num_splits is the caller's decision.
            num_splits = autotune.choose_num_splits(q, k, v, softmax_scale, causal, decision)
            return _native.native_forward(q, k, v, softmax_scale, causal, num_splits)
    result = _native.run(q, k, v, softmax_scale, causal, dropout_p, window_left, window_right,
                         softcap, alibi_slopes is not None, num_splits)
    return _native_or_reference(result, strict, lambda: reference.attention_forward(
        q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
        dropout_p, dropout_seed))


attn_fwd = torch.library.custom_op("flashsplit::fwd", mutates_args=())(attn_fwd_impl)


@attn_fwd.register_fake
def _attn_fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                   alibi_slopes, dropout_p, dropout_seed, num_splits, strict):
    b, sq, h, _ = q.shape
    out = q.new_empty((b, sq, h, v.shape[3]))  # v's head dim
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


# ---- Calls of sequences of their own lengths (varlen, kv cache; sequences.py's layout) -------

def seq_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                 seqused_k: Optional[torch.Tensor], kv_batch_idx: Optional[torch.Tensor],
                 block_table: Optional[torch.Tensor], max_seqlen_q: int, max_seqlen_k: int,
                 softmax_scale: float, causal: bool, window_left: int, window_right: int,
                 softcap: float, alibi_slopes: Optional[torch.Tensor], dropout_p: float,
                 dropout_seed: int, num_splits: int,
                 strict: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """flashsplit::seq_fwd's implementation, as attn_fwd_impl for sequence calls."""
    seqs = sequences.Sequences(cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx, block_table,
                               max_seqlen_q, max_seqlen_k)
    result = _native.run_sequences(q, k, v, seqs, softmax_scale, causal, dropout_p, window_left,
                                   window_right, softcap, alibi_slopes is not None, num_splits)
    return _native_or_reference(result, strict, lambda: sequences.attention_forward(
        q, k, v, seqs, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
        dropout_p, dropout_seed))


seq_fwd = torch.library.custom_op("flashsplit::seq_fwd", mutates_args=())(seq_fwd_impl)


@seq_fwd.register_fake
def _seq_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx, block_table,
                  max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right,
                  softcap, alibi_slopes, dropout_p, dropout_seed, num_splits, strict):
    lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]),
                      dtype=reference.compute_dtype(q.dtype))
    return q.new_empty(q.shape), lse


@torch.library.custom_op("flashsplit::seq_bwd", mutates_args=())
def seq_bwd(dout: torch.Tensor, dlse: Optional[torch.Tensor], q: torch.Tensor,
            k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
            cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
            seqused_k: Optional[torch.Tensor], kv_batch_idx: Optional[torch.Tensor],
            block_table: Optional[torch.Tensor], softmax_scale: float, causal: bool,
            window_left: int, window_right: int, softcap: float,
            alibi_slopes: Optional[torch.Tensor], dropout_p: float,
            dropout_seed: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    seqs = sequences.Sequences(cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx, block_table)
    return sequences.attention_backward(dout, dlse, q, k, v, lse, seqs, softmax_scale, causal,
                                        window_left, window_right, softcap, alibi_slopes,
                                        dropout_p, dropout_seed)


@seq_bwd.register_fake
def _seq_bwd_fake(dout, dlse, q, k, v, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx,
                  block_table, softmax_scale, causal, window_left, window_right, softcap,
                  alibi_slopes, dropout_p, dropout_seed):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _seq_setup_context(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, used_k, kv_batch, pages, _max_q, _max_k, softmax_scale, causal,
     window_left, window_right, softcap, alibi_slopes, dropout_p, dropout_seed, _num_splits,
     _strict) = inputs
    _, lse = output
    ctx.save_for_backward(q, k, v, lse, cu_q, cu_k, used_k, kv_batch, pages, alibi_slopes)
    ctx.options = (softmax_scale, causal, window_left, window_right, softcap, dropout_p,
                   dropout_seed)


def _seq_backward(ctx, dout, dlse):
    q, k, v, lse, cu_q, cu_k, used_k, kv_batch, pages, alibi_slopes = ctx.saved_tensors
    softmax_scale, causal, window_left, window_right, softcap, dropout_p, seed = ctx.options
    if dout is None:
        dout = torch.zeros_like(q)
    dq, dk, dv = seq_bwd(dout, dlse, q, k, v, lse, cu_q, cu_k, used_k, kv_batch, pages,
                         softmax_scale, causal, window_left, window_right, softcap,
                         alibi_slopes, dropout_p, seed)
    return (dq, dk, dv) + (None,) * 17


torch.library.register_autograd("flashsplit::seq_fwd", _seq_backward,
                                setup_context=_seq_setup_context)
