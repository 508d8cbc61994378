"""An independent, deliberately naive attention: the full (b, h, sq, sk) score matrix, in
whatever dtype it is given (callers upcast to fp32/fp64 for a reference, or pass the low
precision inputs as they are to measure how much error low-precision math itself makes).

Written separately from flashsplit.reference (repeat_interleave for GQA, einsum, softmax) so the
two do not share mistakes. Semantics are flash-attn's reference: see flashsplit/reference.py.
"""

import math

import torch


def naive_attention(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, dropout_mask=None):
    """Returns (out (b, sq, h, d), lse (b, h, sq)), both in q's dtype.

    dropout_mask: None, or the per-probability multipliers (b, h, sq, sk): 0 where dropped and
    1 / (1 - p) where kept (e.g. keep.to(dtype) / (1 - p)). A bool mask is refused because it
    carries no p to rescale by.
    """
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    group = h // hk
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(d)
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bihd,bjhd->bhij", q * softmax_scale, k)
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    # Bottom-right alignment: query i lines up with key i + sk - sq.
    diagonal = (torch.arange(sq, device=q.device) + (sk - sq))[:, None]
    key = torch.arange(sk, device=q.device)[None, :]
    if alibi_slopes is not None:
        slopes = alibi_slopes.to(scores.dtype)
        slopes = slopes[None, :] if slopes.dim() == 1 else slopes
        scores = scores - slopes[:, :, None, None] * (diagonal - key).abs().to(scores.dtype)
    left, right = window_size
    if causal:
        right = 0
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:
        visible = visible & (key >= diagonal - left)
    if right >= 0:
        visible = visible & (key <= diagonal + right)
    scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    # Rows that see no key come out of softmax as NaN; flash-attn defines them as 0.
    probs = probs.masked_fill(~visible.any(dim=-1)[:, None], 0.0)
    if dropout_mask is not None:
        if dropout_mask.dtype == torch.bool:
            raise TypeError("dropout_mask must hold multipliers (0 or 1/(1-p)), not bools")
        probs = probs * dropout_mask.to(probs.dtype)
    out = torch.einsum("bhij,bjhd->bihd", probs, v)
    return out, lse
