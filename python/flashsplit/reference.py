"""Reference attention in plain PyTorch math: the fallback forward and the backward of every path.

Semantics are flash-attn's reference (tests/test_flash_attn.py, attention_ref):
  scores = (q * scale) k^T
  softcap > 0:  scores = cap * tanh(scores / cap)
  mask:         query i sees key j iff  i + sk - sq - left <= j <= i + sk - sq + right
                (-1 = unbounded; causal forces right = 0, i.e. bottom-right aligned)
  alibi:        scores += -slope * |i + sk - sq - j|
  P = softmax(scores); rows that see no key give out = 0 and lse = -inf
  dropout:      out = (P * keep / (1 - p)) V, lse unaffected

Memory: query rows are processed in chunks, so the extra memory is a few score-sized tensors
of one chunk (O(chunk * sk) per batch-head), never O(sq * sk). GQA/MQA never copies k or v per
query head: the query heads of one group are stacked as extra rows of one matmul against their
shared kv head.

Precision: fp32 arithmetic (fp64 for fp64 inputs); out in the input dtype, lse in the compute
dtype.
"""

import math

import torch

# Budget, in elements, for one (b, h, rows, sk) score-sized tensor of a chunk. About five such
# tensors are alive at once in the backward. Tests patch it to force many small chunks.
CHUNK_SCORE_ELEMENTS = 1 << 22

# The dropout keep mask is drawn per block of this many query rows, each block from its own
# generator seeded from (seed, block index), so any chunking (forward or backward, any chunk
# size) regenerates exactly the same mask.
DROPOUT_BLOCK_ROWS = 64


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def chunk_rows(b, h, sq, sk):
    """Query rows per chunk so that one score-sized tensor stays within CHUNK_SCORE_ELEMENTS."""
    rows = max(1, CHUNK_SCORE_ELEMENTS // max(1, b * h * sk))
    if rows >= DROPOUT_BLOCK_ROWS:
        # Whole dropout blocks per chunk, so no block's random numbers are drawn twice.
        rows -= rows % DROPOUT_BLOCK_ROWS
    return max(1, min(rows, sq))


def _block_seed(seed, block):
    # A fixed odd-multiplier mix: distinct blocks of one seed get unrelated generator states.
    return (seed * 6364136223846793005 + (block + 1) * 1442695040888963407) % (1 << 64)


def dropout_keep_mask(seed, dropout_p, b, h, row_start, row_end, sk, device):
    """Boolean keep mask (b, h, row_end - row_start, sk) for query rows [row_start, row_end)."""
    parts = []
    first = row_start // DROPOUT_BLOCK_ROWS
    last = (row_end - 1) // DROPOUT_BLOCK_ROWS
    for block in range(first, last + 1):
        gen = torch.Generator(device=device)
        gen.manual_seed(_block_seed(seed, block))
        uniform = torch.rand((b, h, DROPOUT_BLOCK_ROWS, sk), generator=gen, device=device)
        base = block * DROPOUT_BLOCK_ROWS
        lo = max(row_start, base) - base
        hi = min(row_end, base + DROPOUT_BLOCK_ROWS) - base
        parts.append(uniform[:, :, lo:hi] >= dropout_p)
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)


class _ChunkedAttention:
    """Shapes, options and upcast k/v of one call; computes the logits of any row chunk."""

    def __init__(self, q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                 alibi_slopes, dropout_p, dropout_seed):
        self.b, self.sq, self.h, self.d = q.shape
        self.sk, self.hk, self.dv = k.shape[1], k.shape[2], v.shape[3]
        self.g = self.h // self.hk
        self.dtype = compute_dtype(q.dtype)
        self.device = q.device
        self.scale = softmax_scale
        self.left = window_left
        self.right = 0 if causal else window_right
        self.softcap = softcap
        self.dropout_p = dropout_p
        self.dropout_seed = dropout_seed
        # (b, hk, sk, d): one copy at most (the upcast), never one per query head.
        self.k = k.permute(0, 2, 1, 3).to(self.dtype)
        self.v = v.permute(0, 2, 1, 3).to(self.dtype)
        self.slopes = None
        if alibi_slopes is not None:
            # (1 or b, hk, g, 1, 1): query head kvh * g + gi belongs to kv head kvh.
            self.slopes = alibi_slopes.to(self.dtype).reshape(-1, self.hk, self.g, 1, 1)

    def rows(self, t, r0, r1):
        """(b, rows, h, e) slice of a (b, sq, h, e) tensor (q, or out and its gradient with v's
        head dim) -> (b, hk, g * rows, e) in compute dtype."""
        part = t[:, r0:r1].unflatten(2, (self.hk, self.g)).permute(0, 2, 3, 1, 4)
        return part.to(self.dtype).reshape(self.b, self.hk, self.g * (r1 - r0), t.shape[-1])

    def store_rows(self, dst, r0, r1, value):
        """Writes (b, hk, g * rows, e) rows back into a contiguous (b, sq, h, e) tensor."""
        e = dst.shape[-1]
        rows = value.view(self.b, self.hk, self.g, r1 - r0, e).permute(0, 3, 1, 2, 4)
        dst.view(self.b, self.sq, self.hk, self.g, e)[:, r0:r1] = rows

    def _visible(self, r0, r1):
        if self.left < 0 and self.right < 0:
            return None
        i = torch.arange(r0, r1, device=self.device)[:, None] + (self.sk - self.sq)
        j = torch.arange(self.sk, device=self.device)[None, :]
        visible = torch.ones((r1 - r0, self.sk), dtype=torch.bool, device=self.device)
        if self.left >= 0:
            visible &= j >= i - self.left
        if self.right >= 0:
            visible &= j <= i + self.right
        return visible

    def logits(self, q_rows, r0, r1):
        """Masked scores (b, hk, g, rows, sk) and tanh(raw / cap) (None without softcap)."""
        raw = torch.matmul(q_rows * self.scale, self.k.transpose(-1, -2))
        scores = raw.view(self.b, self.hk, self.g, r1 - r0, self.sk)
        capped = None
        if self.softcap > 0:
            capped = torch.tanh(scores / self.softcap)
            scores = capped * self.softcap
        if self.slopes is not None:
            i = torch.arange(r0, r1, device=self.device)[:, None] + (self.sk - self.sq)
            j = torch.arange(self.sk, device=self.device)[None, :]
            distance = (i - j).abs().to(self.dtype)
            scores = scores - self.slopes * distance
        visible = self._visible(r0, r1)
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        return scores, capped

    def dropout_scale(self, r0, r1):
        """keep / (1 - p) as (b, hk, g, rows, sk), or None without dropout."""
        if self.dropout_p == 0.0:
            return None
        keep = dropout_keep_mask(self.dropout_seed, self.dropout_p, self.b, self.h, r0, r1,
                                 self.sk, self.device)
        scale = keep.to(self.dtype) * (1.0 / (1.0 - self.dropout_p))
        return scale.view(self.b, self.hk, self.g, r1 - r0, self.sk)

    def chunks(self):
        step = chunk_rows(self.b, self.h, self.sq, self.sk)
        for r0 in range(0, self.sq, step):
            yield r0, min(self.sq, r0 + step)

    def lse_view(self, lse):
        return lse.view(self.b, self.hk, self.g, self.sq)


def attention_forward(q, k, v, softmax_scale, causal=False, window_left=-1, window_right=-1,
                      softcap=0.0, alibi_slopes=None, dropout_p=0.0, dropout_seed=0):
    """Returns (out like q's dtype, contiguous (b, sq, h, dv) with v's head dim dv; lse (b, h, sq)
    in compute dtype)."""
    a = _ChunkedAttention(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                          alibi_slopes, dropout_p, dropout_seed)
    out = torch.empty((a.b, a.sq, a.h, a.dv), dtype=q.dtype, device=q.device)
    lse = torch.empty((a.b, a.h, a.sq), dtype=a.dtype, device=q.device)
    if lse.numel() == 0:
        return out, lse  # no query rows (an empty batch): nothing to compute
    if a.sk == 0:
        # No keys at all: every row sees nothing.
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    for r0, r1 in a.chunks():
        scores, _ = a.logits(a.rows(q, r0, r1), r0, r1)
        row_max = scores.amax(dim=-1, keepdim=True)
        # A row that sees no key has max -inf; shifting by 0 keeps exp() at 0 instead of NaN.
        row_max = torch.where(row_max == float("-inf"), torch.zeros_like(row_max), row_max)
        probs = torch.exp(scores - row_max)
        denom = probs.sum(dim=-1, keepdim=True)
        a.lse_view(lse)[..., r0:r1] = (row_max + torch.log(denom)).squeeze(-1)
        probs = probs / torch.where(denom == 0, torch.ones_like(denom), denom)
        drop = a.dropout_scale(r0, r1)
        if drop is not None:
            probs = probs * drop
        o = torch.matmul(probs.view(a.b, a.hk, a.g * (r1 - r0), a.sk), a.v)
        a.store_rows(out, r0, r1, o)
    return out, lse


def attention_backward(dout, dlse, q, k, v, lse, softmax_scale, causal=False, window_left=-1,
                       window_right=-1, softcap=0.0, alibi_slopes=None, dropout_p=0.0,
                       dropout_seed=0):
    """Gradients (dq, dk, dv) in the input dtypes from the forward's saved lse.

    P is recomputed chunk by chunk from lse; dS = P * (dP - D + dlse) with D = rowsum(P * dP),
    which equals rowsum(dout * out) but uses the recomputed fp32 P instead of the rounded out.
    dk/dv accumulate in the compute dtype over chunks (and over the query heads of a group).
    """
    a = _ChunkedAttention(q, k, v, softmax_scale, causal, window_left, window_right, softcap,
                          alibi_slopes, dropout_p, dropout_seed)
    dq = torch.zeros((a.b, a.sq, a.h, a.d), dtype=q.dtype, device=q.device)
    dk = torch.zeros((a.b, a.hk, a.sk, a.d), dtype=a.dtype, device=q.device)
    dv = torch.zeros((a.b, a.hk, a.sk, a.dv), dtype=a.dtype, device=q.device)
    if a.sk == 0 or a.b * a.h * a.sq == 0:
        return dq, _to_kv_layout(dk, k.dtype), _to_kv_layout(dv, v.dtype)
    lse_all = a.lse_view(lse)
    dlse_all = None if dlse is None else a.lse_view(dlse)
    for r0, r1 in a.chunks():
        rows = a.g * (r1 - r0)
        q_rows = a.rows(q, r0, r1)
        do_rows = a.rows(dout, r0, r1)
        scores, capped = a.logits(q_rows, r0, r1)
        row_lse = lse_all[..., r0:r1].to(a.dtype).unsqueeze(-1)
        # A row with lse = -inf saw no key: shifting by +inf gives P = 0 there, not NaN.
        row_lse = torch.where(row_lse == float("-inf"), torch.full_like(row_lse, float("inf")),
                              row_lse)
        probs = torch.exp(scores - row_lse)
        dprobs = torch.matmul(do_rows, a.v.transpose(-1, -2)).view_as(probs)
        drop = a.dropout_scale(r0, r1)
        kept = probs if drop is None else probs * drop
        if drop is not None:
            dprobs = dprobs * drop
        dv += torch.matmul(kept.view(a.b, a.hk, rows, a.sk).transpose(-1, -2), do_rows)
        delta = (probs * dprobs).sum(dim=-1, keepdim=True)
        dscores = dprobs - delta
        if dlse_all is not None:
            dscores = dscores + dlse_all[..., r0:r1].to(a.dtype).unsqueeze(-1)
        dscores = probs * dscores
        if capped is not None:
            dscores = dscores * (1.0 - capped * capped)
        dscores = dscores.view(a.b, a.hk, rows, a.sk)
        a.store_rows(dq, r0, r1, torch.matmul(dscores, a.k) * softmax_scale)
        dk += torch.matmul(dscores.transpose(-1, -2), q_rows) * softmax_scale
    return dq, _to_kv_layout(dk, k.dtype), _to_kv_layout(dv, v.dtype)


def _to_kv_layout(t, dtype):
    # (b, hk, sk, d) accumulator -> contiguous (b, sk, hk, d) in the input dtype.
    return t.permute(0, 2, 1, 3).to(dtype).contiguous()


def default_softmax_scale(head_dim):
    return 1.0 / math.sqrt(head_dim)
