"""bench_kvcache's page order: every page of the pool once, and with --shuffle-run each page
within its own run of neighbouring pages."""

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
