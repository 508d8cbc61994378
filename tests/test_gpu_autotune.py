"""FLASHSPLIT_AUTOTUNE=1 on the GPU: the tuned call is still exact, and it leaves its choice in
the cache file for the next call (tests/test_autotune.py covers the logic on CPU)."""

import json
import os

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from flashsplit import autotune  # noqa: E402

# full_fp32_matmuls is an autouse fixture: importing it makes it apply in this module too.
from test_gpu_common import (  # noqa: E402
    assert_matches_reference, assert_native, fs_forward, full_fp32_matmuls,  # noqa: F401
    generator_for, rand_qkv, references, requires_native)


@requires_native
def test_autotuned_split_matches_reference_and_is_cached(request, tmp_path, monkeypatch):
    monkeypatch.setenv(autotune.ENV_FLAG, "1")
    monkeypatch.setenv(autotune.CACHE_DIR_ENV, str(tmp_path))
    autotune.clear_memory_cache()  # a bucket tuned earlier in this process would skip timing
    try:
        # Few query tiles over many keys: the shape split-KV is for, so G > 1 is in play.
        b, h, hk, sq, sk, d = 1, 4, 4, 64, 8192, 64
        q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, torch.bfloat16)
        decision = assert_native(q, k, v)
        out, lse = fs_forward(q, k, v)
        assert_matches_reference(out, lse, q, k, references(q, k, v), False, "autotuned")

        path = autotune.cache_path(autotune.device_label(q.device))
        assert os.path.isfile(path), f"no cache file at {path}: {os.listdir(tmp_path)}"
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        bucket = autotune._bucket_text(autotune.bucket_key(q, k, False, decision["kernel"]))
        assert bucket in saved["buckets"], f"{bucket} missing from {sorted(saved['buckets'])}"
        entry = saved["buckets"][bucket]
        candidates = autotune.candidate_splits(decision["num_splits"], sk,
                                               decision["details"]["split_block_n"])
        assert entry["num_splits"] in candidates, (entry, candidates)
        assert sorted(int(g) for g in entry["times_ms"]) == candidates, entry
        assert all(t > 0 for t in entry["times_ms"].values()), entry

        # The next call finds the bucket: no timing, no rewrite, the same G so the same bits.
        stamp = os.stat(path).st_mtime_ns
        out2, lse2 = fs_forward(q, k, v)
        assert os.stat(path).st_mtime_ns == stamp, "a cached bucket must not be re-tuned"
        assert torch.equal(out2, out) and torch.equal(lse2, lse)
    finally:
        autotune.clear_memory_cache()
