"""bench_kvcache's page order (every page of the pool once, and with --shuffle-run each page
within its own run of neighbouring pages), its --grid draw and its summary over shapes."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_kvcache  # noqa: E402


@pytest.mark.parametrize("pages,run", [(40, 16), (64, 16), (7, 3), (10, 0), (10, 10), (10, 25)])
def test_page_order_shuffles_every_page_within_its_run(pages, run):
    order = bench_kvcache.page_order(torch, pages, run, torch.Generator().manual_seed(pages + run))
    assert sorted(order.tolist()) == list(range(pages))
    if 0 < run < pages:
        assert all(int(order[i]) // run == i // run for i in range(pages)), order.tolist()
    assert order.tolist() != list(range(pages)), "a shuffle moves pages"


def test_shuffle_run_must_not_be_negative():
    with pytest.raises(SystemExit):
        bench_kvcache.parse_args(["--shuffle-run", "-1"])


def test_the_grid_draws_decode_shapes_inside_its_range_and_the_same_for_a_seed():
    shapes = bench_kvcache.grid_shapes(200, seed=3)
    r = bench_kvcache.GRID_RANGE
    assert len(shapes) == 200 and shapes == bench_kvcache.grid_shapes(200, seed=3)
    assert shapes != bench_kvcache.grid_shapes(200, seed=4)
    for b, sq, h, hk, s, d in shapes:
        assert sq == 1 and h % hk == 0 and d in r["d"]
        for name, value in (("b", b), ("hk", hk), ("group", h // hk), ("s_cache", s)):
            low, high = r[name]
            assert low <= value <= high, (name, value)
        assert 4 * b * s * hk * d <= bench_kvcache.GRID_MAX_CACHE_BYTES
    # The draw covers the range: both head dims, groups of 1 and 16, short and long caches.
    assert {d for *_, d in shapes} == {64, 128}
    assert {1, 16} <= {h // hk for _, _, h, hk, _, _ in shapes}
    assert min(s for *_, s, _ in shapes) < 4096 and max(s for *_, s, _ in shapes) > 131072


def test_grid_and_shape_are_exclusive_and_the_grid_is_not_negative():
    assert bench_kvcache.parse_args(["--grid", "4", "--seed", "1"]).shapes == \
        bench_kvcache.grid_shapes(4, 1)
    with pytest.raises(SystemExit):
        bench_kvcache.parse_args(["--grid", "4", "--shape", "1,1,8,8,2048,128"])
    with pytest.raises(SystemExit):
        bench_kvcache.parse_args(["--grid", "-1"])


def test_the_summary_counts_shapes_behind_a_peer_and_paged_calls_past_ten_percent():
    summary = bench_kvcache.ratio_summary({
        "cudnn/fs": [(1.02, "a"), (0.97, "b"), (1.10, "c")],
        "page16/fs": [(1.04, "a"), (1.12, "b"), (1.01, "c")],
        "fa3/fs": []})
    cudnn, paged = summary.splitlines()
    assert cudnn.startswith("cudnn/fs: geomean 1.029,") and "lowest 0.970 at (b)" in cudnn
    assert "highest 1.100 at (c)" in cudnn and cudnn.endswith("below 1.0 on 1 of 3")
    assert "lowest 1.010 at (c)" in paged and paged.endswith("past 1.10 on 1 of 3")
