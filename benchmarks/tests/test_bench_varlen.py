"""bench_varlen's unequal batch: the same tokens as the equal one, spread from s/2 to 3s/2."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_varlen  # noqa: E402


@pytest.mark.parametrize("b,s", [(1, 777), (2, 4096), (4, 2048), (8, 777), (16, 512)])
def test_unequal_lengths_keep_the_tokens_and_spread_from_half_to_one_and_a_half(b, s):
    lengths = bench_varlen.unequal_lengths(b, s)
    assert len(lengths) == b
    assert sum(lengths) == b * s
    assert all(s // 2 <= n <= 3 * s // 2 + b for n in lengths), lengths
    if b > 1:
        assert lengths[0] == s // 2 and len(set(lengths)) > 1, lengths
