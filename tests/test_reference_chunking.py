"""The reference path processes query rows in chunks: results do not depend on the chunk size,
and no tensor it allocates grows like sq * sk."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from flashsplit import reference


class _LargestAllocation(TorchDispatchMode):
    """Records the largest storage (bytes) of any tensor an aten op returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for value in tree_flatten(result)[0]:
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.untyped_storage().nbytes())
        return result


def _inputs(b, sq, sk, h, hk, d, dtype=torch.float32):
    return tuple(torch.randn(b, s, n, d, dtype=dtype) for s, n in ((sq, h), (sk, hk), (sk, hk)))


def test_chunk_rows_respects_the_budget(monkeypatch):
    monkeypatch.setattr(reference, "CHUNK_SCORE_ELEMENTS", 1000)
    assert reference.chunk_rows(1, 1, 500, 10) == 64   # 100 rows fit; whole dropout blocks
    assert reference.chunk_rows(1, 2, 500, 10) == 50   # under one block: exact fit
    assert reference.chunk_rows(1, 1, 30, 10) == 30    # never more than sq
    assert reference.chunk_rows(1, 1, 500, 5000) == 1  # at least one row


@pytest.mark.parametrize("rows_per_chunk", [1, 5, 64])
def test_results_do_not_depend_on_chunk_size(monkeypatch, rows_per_chunk):
    b, sq, sk, h, hk = 2, 150, 77, 4, 2
    q, k, v = _inputs(b, sq, sk, h, hk, 16, torch.float64)
    dout = torch.randn_like(q)
    dlse = torch.randn(b, h, sq, dtype=torch.float64)
    options = dict(softmax_scale=0.3, causal=True, window_left=40, window_right=-1,
                   softcap=2.0, alibi_slopes=torch.rand(b, h), dropout_p=0.1, dropout_seed=8)

    def run():
        out, lse = reference.attention_forward(q, k, v, **options)
        return (out, lse) + reference.attention_backward(dout, dlse, q, k, v, lse, **options)

    whole = run()
    assert reference.chunk_rows(b, h, sq, sk) == sq
    monkeypatch.setattr(reference, "CHUNK_SCORE_ELEMENTS", rows_per_chunk * b * h * sk)
    assert reference.chunk_rows(b, h, sq, sk) == rows_per_chunk
    for name, a, c in zip(["out", "lse", "dq", "dk", "dv"], whole, run()):
        torch.testing.assert_close(a, c, rtol=0, atol=1e-12, msg=name)


@pytest.mark.parametrize("dropout_p", [0.0, 0.2])
def test_no_allocation_grows_like_sq_times_sk(monkeypatch, dropout_p):
    b, sq, sk, h, hk, d = 1, 1024, 1024, 2, 1, 16
    q, k, v = _inputs(b, sq, sk, h, hk, d)
    monkeypatch.setattr(reference, "CHUNK_SCORE_ELEMENTS", 64 * b * h * sk)
    chunk_bytes = 64 * b * h * sk * 4  # one fp32 score-sized tensor of a 64-row chunk
    full_bytes = b * h * sq * sk * 4   # the whole score matrix: 16x a chunk
    options = dict(softmax_scale=0.25, causal=True, window_left=-1, window_right=-1,
                   softcap=1.0, alibi_slopes=torch.rand(h), dropout_p=dropout_p,
                   dropout_seed=1)

    with _LargestAllocation() as forward:
        out, lse = reference.attention_forward(q, k, v, **options)
    with _LargestAllocation() as backward:
        reference.attention_backward(torch.randn_like(out), torch.randn_like(lse), q, k, v,
                                     lse, **options)
    assert 0 < forward.largest <= chunk_bytes < full_bytes
    assert 0 < backward.largest <= chunk_bytes < full_bytes
