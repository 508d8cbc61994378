"""flash-attn's tolerance rule (as in its tests/test_flash_attn.py), shared by the tests.

A result passes when its max error against a high-precision reference is at most twice the max
error that the same naive math makes when run in the inputs' own (low) precision, plus a small
absolute slack for the rounding of the result's dtype. NaN never passes; -inf must match -inf.
"""

import torch

from naive_attention import naive_attention

# Absolute slack per input dtype: about one unit in the last place of values near 1.
SLACK = {
    torch.float16: 1e-3,
    torch.bfloat16: 8e-3,
    torch.float32: 1e-6,
    torch.float64: 1e-12,
}


def naive_pair(q, k, v, **kwargs):
    """((out, lse) in fp64, (out, lse) in the inputs' dtype) from the naive reference."""
    high = naive_attention(q.double(), k.double(), v.double(), **kwargs)
    low = naive_attention(q, k, v, **kwargs)
    return high, low


def assert_within_tolerance(actual, high, low, dtype, what):
    """max |actual - high| <= 2 * max |low - high| + SLACK[dtype], over entries finite in high."""
    actual = actual.detach().to(torch.float64)
    high = high.detach().to(torch.float64)
    low = low.detach().to(torch.float64)
    assert actual.shape == high.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(high.shape)}"
    assert torch.equal(torch.isneginf(actual), torch.isneginf(high)), \
        f"{what}: -inf entries differ from the reference"
    finite = torch.isfinite(high)
    assert torch.isfinite(actual[finite]).all(), f"{what}: NaN/inf where the reference is finite"
    if not finite.any():
        return
    err = (actual - high)[finite].abs().max().item()
    low_err = (low - high)[finite].abs().nan_to_num(nan=0.0).max().item()
    bound = 2 * low_err + SLACK[dtype]
    assert err <= bound, f"{what}: max error {err:.3e} > bound {bound:.3e} (low-precision {low_err:.3e})"
