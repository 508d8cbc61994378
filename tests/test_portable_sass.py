"""The portable kernels' machine code for Hopper (sm_90a, as setup.py builds them), checked
without a GPU.

A decode call starts with a cold instruction cache: the kernels of a model's previous layer ran
in between. A paged instance copies K and V at four places of its walk, each with the copy path
for page sizes each half of a thread's run of rows fits in and the per-row path for the others,
so what it costs over the contiguous instance is mostly code. The test holds every paged
instance of the decode head dims to 1.5x the instructions of its contiguous twin (the same tile,
mask and split); unrolled, the per-row path and the table copies made it 2.5x, and a paged call
then ran 10-20% slower after another kernel than after itself (docs/design.md).
"""

import os
import re

import pytest

from cuda_sass import REPO, compile_unit, kernels, tools_or_skip

UNITS = [os.path.join(REPO, "csrc", "kernels", "sm80", f"fwd_bf16_d{d}.cu") for d in (64, 128)]
MAX_PAGED_CODE_RATIO = 1.5


def layout_twins(found):
    """(paged name, contiguous name) pairs: the same instance over KvLayout::kPaged (2) and
    KvLayout::kSequences (1)."""
    pairs = []
    for name in found:
        if re.search(r"KvLayoutE2E", name):
            twin = re.sub(r"KvLayoutE2E", "KvLayoutE1E", name)
            assert twin in found, f"no contiguous instance beside {name}"
            pairs.append((name, twin))
    return pairs


@pytest.mark.parametrize("unit", UNITS, ids=[os.path.basename(u) for u in UNITS])
def test_paged_instances_carry_little_more_code_than_contiguous_ones(unit, tmp_path):
    nvcc, dump = tools_or_skip()
    _, sass = compile_unit(nvcc, dump, unit, str(tmp_path))
    found = kernels(sass)
    pairs = layout_twins(found)
    # The narrow and the wide tile, causal or not, split or not (8), and the key-warp tiles of
    # one and two blocks an SM, copies staggered or not, causal or not (8: they run unsplit
    # only).
    assert len(pairs) == 16, f"expected 16 paged instances (2 x 2 x 2 + 2 x 2 x 2): {len(pairs)}"
    ratios = {paged: len(found[paged]) / len(found[twin]) for paged, twin in pairs}
    too_big = {name: round(r, 2) for name, r in ratios.items() if r > MAX_PAGED_CODE_RATIO}
    assert not too_big, too_big
