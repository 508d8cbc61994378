"""Calls made of sequences of their own lengths (varlen, kv cache): the layout they share and the
reference path's forward and backward over them.

A sequence call comes in the layout the kernels read (flashsplit._C.Sequences):
  q        (b, sq, h, d), or (1, total_q, h, d) with cu_seqlens_q: sequence i's queries are rows
           [cu_seqlens_q[i], cu_seqlens_q[i + 1])
  k, v     (b_k, s_k, hk, d); (1, total_k, hk, d) with cu_seqlens_k; or pages
           (pages, page_size, hk, d) with block_table: key j of sequence i lives in page
           block_table[i, j // page_size], row j % page_size
  seqused_k      (b,) the keys sequence i attends to (else its cu_seqlens_k length, else s_k)
  kv_batch_idx   (b,) the batch of contiguous k/v that holds sequence i's keys
out is laid out like q and lse as (q.size(0), h, q.size(1)).

The reference path gathers each sequence's rows by flat row indices, runs the dense reference on
them, and scatters the results back; its backward adds the gradients at the same indices, so
keys that sequences share (a cache batch used twice) collect every sequence's gradient.
"""

from dataclasses import dataclass
from typing import Optional

import torch

from . import reference


@dataclass
class Sequences:
    """Where a sequence call's sequences live (see the module's docstring)."""
    cu_seqlens_q: Optional[torch.Tensor] = None
    cu_seqlens_k: Optional[torch.Tensor] = None
    seqused_k: Optional[torch.Tensor] = None
    kv_batch_idx: Optional[torch.Tensor] = None
    block_table: Optional[torch.Tensor] = None
    max_seqlen_q: int = 0
    max_seqlen_k: int = 0

    def count(self, q):
        return q.shape[0] if self.cu_seqlens_q is None else self.cu_seqlens_q.shape[0] - 1


def _host_list(t):
    return None if t is None else [int(x) for x in t.tolist()]


def row_indices(q, k, seqs):
    """Per sequence: (flat query rows of q viewed as (rows, h, d), flat key rows of k viewed as
    (rows, hk, d)), as int64 tensors on q's device."""
    n = seqs.count(q)
    cu_q, cu_k = _host_list(seqs.cu_seqlens_q), _host_list(seqs.cu_seqlens_k)
    used, kv_batch = _host_list(seqs.seqused_k), _host_list(seqs.kv_batch_idx)
    pages = None if seqs.block_table is None else seqs.block_table.to(torch.int64)
    q_rows, k_rows = q.shape[1], k.shape[1]
    result = []
    for i in range(n):
        if cu_q is None:
            q0, sq = i * q_rows, q_rows
        else:
            q0, sq = cu_q[i], cu_q[i + 1] - cu_q[i]
        key0, sk = (0, k_rows) if cu_k is None else (cu_k[i], cu_k[i + 1] - cu_k[i])
        if used is not None:
            sk = used[i]
        keys = torch.arange(sk, device=q.device)
        if pages is not None:
            flat_k = pages[i, keys // k_rows] * k_rows + keys % k_rows
        else:
            batch = i if kv_batch is None else kv_batch[i]
            if cu_k is not None:
                batch = 0
            flat_k = batch * k_rows + key0 + keys
        result.append((torch.arange(q0, q0 + sq, device=q.device), flat_k))
    return result


def _flat(t):
    return t.reshape(-1, t.shape[-2], t.shape[-1])


def _slopes_of(alibi_slopes, i):
    if alibi_slopes is None or alibi_slopes.dim() == 1:
        return alibi_slopes
    return alibi_slopes[i]


def _seed_of(dropout_seed, i):
    # Each sequence draws its own dropout mask from the call's seed.
    return (dropout_seed * 1000003 + i) % (1 << 62)


def attention_forward(q, k, v, seqs, softmax_scale, causal=False, window_left=-1,
                      window_right=-1, softcap=0.0, alibi_slopes=None, dropout_p=0.0,
                      dropout_seed=0):
    """(out like q, lse (q.size(0), h, q.size(1)) in the compute dtype). Query rows of q that no
    sequence owns come out 0 with lse = -inf."""
    b, rows, h, _ = q.shape
    out = torch.zeros_like(q, memory_format=torch.contiguous_format)
    flat_lse = torch.full((b * rows, h), float("-inf"), dtype=reference.compute_dtype(q.dtype),
                          device=q.device)
    flat_out = _flat(out)
    qf, kf, vf = _flat(q), _flat(k), _flat(v)
    for i, (q_idx, k_idx) in enumerate(row_indices(q, k, seqs)):
        o_i, lse_i = reference.attention_forward(
            qf[q_idx][None], kf[k_idx][None], vf[k_idx][None], softmax_scale, causal,
            window_left, window_right, softcap, _slopes_of(alibi_slopes, i), dropout_p,
            _seed_of(dropout_seed, i))
        flat_out[q_idx] = o_i[0]
        flat_lse[q_idx] = lse_i[0].transpose(0, 1)
    return out, flat_lse.view(b, rows, h).transpose(1, 2).contiguous()


def attention_backward(dout, dlse, q, k, v, lse, seqs, softmax_scale, causal=False,
                       window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None,
                       dropout_p=0.0, dropout_seed=0):
    """(dq, dk, dv) like q, k, v from the forward's lse."""
    ct = reference.compute_dtype(q.dtype)
    dq = torch.zeros(q.shape, dtype=ct, device=q.device)
    dk = torch.zeros(k.shape, dtype=ct, device=q.device)
    dv = torch.zeros(v.shape, dtype=ct, device=q.device)
    dqf, dkf, dvf = _flat(dq), _flat(dk), _flat(dv)
    qf, kf, vf, dof = _flat(q), _flat(k), _flat(v), _flat(dout)
    lse_rows = lse.transpose(1, 2).reshape(-1, q.shape[2])
    dlse_rows = None if dlse is None else dlse.transpose(1, 2).reshape(-1, q.shape[2])
    for i, (q_idx, k_idx) in enumerate(row_indices(q, k, seqs)):
        if q_idx.numel() == 0:
            continue
        dl = None if dlse_rows is None else dlse_rows[q_idx].transpose(0, 1)[None]
        dq_i, dk_i, dv_i = reference.attention_backward(
            dof[q_idx][None], dl, qf[q_idx][None], kf[k_idx][None], vf[k_idx][None],
            lse_rows[q_idx].transpose(0, 1)[None], softmax_scale, causal, window_left,
            window_right, softcap, _slopes_of(alibi_slopes, i), dropout_p,
            _seed_of(dropout_seed, i))
        dqf.index_add_(0, q_idx, dq_i[0].to(ct))
        dkf.index_add_(0, k_idx, dk_i[0].to(ct))
        dvf.index_add_(0, k_idx, dv_i[0].to(ct))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
