"""bench_varlen: its unequal batch (the same tokens as the equal one, spread from s/2 to 3s/2)
and its --shape option."""

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


def test_shape_option_reads_b_s_h_hk_d_and_names_a_bad_one():
    args = bench_varlen.parse_args(["--shape", "1,16384,32,8,128", "--shape", "2,512,4,4,64"])
    assert args.shape == [(1, 16384, 32, 8, 128), (2, 512, 4, 4, 64)]
    assert bench_varlen.parse_args([]).shape is None
    for bad in ("1,512,32,8", "1,512,32,5,128", "0,512,4,4,64"):
        with pytest.raises(SystemExit):
            bench_varlen.parse_args(["--shape", bad])
