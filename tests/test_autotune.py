"""FLASHSPLIT_AUTOTUNE on a CPU machine: buckets, candidates, the cache file, and the hook in
ops.attn_fwd. A fake timer (and, where the whole path runs, a fake native forward) stands in
for the GPU; tests/test_gpu_autotune.py runs the real thing."""

import contextlib
import json
import os
import types
import warnings

import pytest
import torch

import flashsplit
from flashsplit import _native, autotune, flash_attn_func, reference_attention

LABEL = "Fake GPU 80GB sm_90"
BUCKET = ("bfloat16", 64, False, 1, 4, 4, 64, 8192, "hopper_wgmma")
CANDIDATES = autotune.candidate_splits(8, 8192, 128)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test tunes into its own folder, starting from an empty in-process cache."""
    monkeypatch.setenv(autotune.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(autotune.ENV_FLAG, raising=False)
    autotune.clear_memory_cache()
    yield
    autotune.clear_memory_cache()


class FakeTimer:
    """Runs fn once (so run(G) really happens) and answers the time listed for that G."""

    def __init__(self, times, default=10.0):
        self.times, self.default = times, default
        self.calls = 0
        self.timed = []

    def run(self, g):
        self.timed.append(g)

    def __call__(self, fn):
        self.calls += 1
        fn()
        return self.times.get(self.timed[-1], self.default)


def _read_cache(label=LABEL):
    with open(autotune.cache_path(label), encoding="utf-8") as f:
        return json.load(f)


def _tune(timer, bucket=BUCKET, candidates=CANDIDATES):
    return autotune.tuned_num_splits(LABEL, bucket, candidates, timer.run, timer)


# ------------------------------------------------------------------------------- buckets

@pytest.mark.parametrize("n, rounded", [(0, 1), (1, 1), (2, 2), (3, 4), (64, 64), (65, 128),
                                        (8192, 8192), (8193, 16384), (65535, 65536)])
def test_next_power_of_two(n, rounded):
    assert autotune.next_power_of_two(n) == rounded


def test_bucket_rounds_the_lengths_up_and_keeps_everything_else():
    q = torch.empty(2, 100, 8, 64, dtype=torch.float16)
    k = torch.empty(2, 5000, 2, 64, dtype=torch.float16)
    assert autotune.bucket_key(q, k, True, "portable_mma") == \
        ("float16", 64, True, 2, 8, 2, 128, 8192, "portable_mma")
    # Nearby lengths share the bucket; crossing a power of two or changing a head count does not.
    near = autotune.bucket_key(q[:, :65], torch.empty(2, 4097, 2, 64, dtype=torch.float16),
                               True, "portable_mma")
    assert near == autotune.bucket_key(q, k, True, "portable_mma")
    assert autotune.bucket_key(q[:, :64], k, True, "portable_mma")[6] == 64
    assert autotune.bucket_key(q, k[:, :, :1], True, "portable_mma") != near
    assert autotune.bucket_key(q, k, False, "portable_mma") != near
    assert autotune.bucket_key(q, k, True, "hopper_wgmma") != near


# ---------------------------------------------------------------------------- candidates

def test_candidates_are_clamped_to_the_key_blocks_and_deduplicated():
    # 8192 / 128 = 64 key blocks: 128 clamps to 64, which is already there.
    assert autotune.candidate_splits(8, 8192, 128) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    # 300 keys in blocks of 128 = 3 blocks: everything above 3 collapses onto 3.
    assert autotune.candidate_splits(2, 300, 128) == [1, 2, 3]
    assert autotune.candidate_splits(1, 1, 64) == [1]


def test_candidates_include_the_heuristics_own_g():
    assert 5 in autotune.candidate_splits(5, 65536, 128)
    assert 5 not in autotune.candidate_splits(1, 65536, 128)
    # A heuristic G beyond the key blocks is clamped like the others.
    assert autotune.candidate_splits(500, 1024, 64) == [1, 2, 3, 4, 6, 8, 12, 16]


def test_key_blocks_names_a_bad_block_n():
    with pytest.raises(ValueError, match="block_n"):
        autotune.candidate_splits(1, 1024, 0)


# ---------------------------------------------------------------------------- cache file

def test_cache_dir_precedence(tmp_path, monkeypatch):
    assert autotune.cache_dir() == str(tmp_path)
    monkeypatch.delenv(autotune.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert autotune.cache_dir() == os.path.join(str(tmp_path / "xdg"), "flashsplit")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert autotune.cache_dir() == os.path.join(str(tmp_path / "home"), ".cache", "flashsplit")


def test_cache_file_name_is_sanitised_and_stays_in_the_cache_dir(tmp_path):
    path = autotune.cache_path("NVIDIA H100 80GB HBM3 sm_90")
    assert path == os.path.join(str(tmp_path), "autotune_NVIDIA_H100_80GB_HBM3_sm_90.json")
    hostile = autotune.cache_path("../../etc/passwd sm_90")
    assert os.path.dirname(hostile) == str(tmp_path)
    assert os.path.basename(hostile) == "autotune_etc_passwd_sm_90.json"


def test_fastest_g_is_chosen_saved_and_not_timed_again():
    timer = FakeTimer({1: 5.0, 2: 3.0, 8: 1.0, 16: 2.0})
    assert _tune(timer) == 8
    assert timer.calls == len(CANDIDATES) and sorted(timer.timed) == CANDIDATES

    saved = _read_cache()
    assert saved["device"] == LABEL
    (entry,) = saved["buckets"].values()
    assert entry["num_splits"] == 8 and entry["times_ms"]["8"] == 1.0
    assert not [n for n in os.listdir(os.path.dirname(autotune.cache_path(LABEL)))
                if n.endswith(".tmp")], "the atomic write left its temp file behind"

    assert _tune(timer) == 8
    assert timer.calls == len(CANDIDATES), "a known bucket must not be timed again"
    # A new process (empty memory) reads the file instead of timing.
    autotune.clear_memory_cache()
    assert _tune(timer) == 8
    assert timer.calls == len(CANDIDATES)


def test_each_bucket_is_timed_once_and_both_are_kept():
    timer = FakeTimer({4: 1.0})
    other = BUCKET[:7] + (65536,) + BUCKET[8:]
    assert _tune(timer) == 4
    assert _tune(FakeTimer({12: 1.0}), bucket=other) == 12
    assert sorted(e["num_splits"] for e in _read_cache()["buckets"].values()) == [4, 12]


def test_ties_go_to_the_smaller_g():
    assert _tune(FakeTimer({}, default=1.0)) == 1


def test_a_candidate_that_runs_out_of_memory_is_skipped():
    class OomAtLargeG(FakeTimer):
        def __call__(self, fn):
            ms = super().__call__(fn)
            if self.timed[-1] >= 32:
                raise torch.cuda.OutOfMemoryError("fake OOM")
            return ms

    timer = OomAtLargeG({64: 0.1, 24: 1.0})
    assert _tune(timer) == 24
    assert set(_read_cache()["buckets"][autotune._bucket_text(BUCKET)]["times_ms"]) == \
        {str(g) for g in CANDIDATES if g < 32}


def test_nothing_timed_means_no_answer_and_no_file():
    def always_oom(fn):
        raise torch.cuda.OutOfMemoryError("fake OOM")

    assert autotune.tuned_num_splits(LABEL, BUCKET, CANDIDATES, lambda g: None,
                                     always_oom) is None
    assert not os.path.exists(autotune.cache_path(LABEL))


@pytest.mark.parametrize("content", [
    "{not json",
    "[]",
    json.dumps({"format": 1, "device": LABEL, "buckets": {"x": {"num_splits": 0}}}),
    json.dumps({"format": 1, "device": "another GPU", "buckets": {}}),
], ids=["bad-json", "not-an-object", "bad-entry", "other-device"])
def test_unusable_file_warns_once_and_is_retuned(content):
    path = autotune.cache_path(LABEL)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    timer = FakeTimer({6: 1.0})
    with pytest.warns(RuntimeWarning, match="unusable cache file"):
        assert _tune(timer) == 6
    assert timer.calls == len(CANDIDATES)
    assert _read_cache()["buckets"][autotune._bucket_text(BUCKET)]["num_splits"] == 6

    other = BUCKET[:6] + (128,) + BUCKET[7:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning: the file is read once
        assert _tune(FakeTimer({3: 1.0}), bucket=other) == 3


def test_unwritable_cache_dir_warns_and_keeps_the_choice_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(autotune.CACHE_DIR_ENV, str(blocker / "cache"))
    timer = FakeTimer({2: 1.0})
    with pytest.warns(RuntimeWarning) as record:
        assert _tune(timer) == 2
    assert any("cannot write" in str(w.message) for w in record)
    assert _tune(timer) == 2
    assert timer.calls == len(CANDIDATES)


# ---------------------------------------------------------------- choose_num_splits (entry)

NATIVE_DECISION = {"path": "native", "num_splits": 8, "kernel": "hopper_wgmma", "reason": "",
                   "details": {"block_m": 128, "block_n": 128, "split_block_n": 128}}


def _never(fn):
    raise AssertionError("the timer must not run here")


def test_cpu_tensors_are_never_timed(tmp_path):
    q, k = torch.empty(1, 64, 4, 64), torch.empty(1, 8192, 4, 64)
    assert "CUDA" in autotune.timing_blocker(q)
    assert autotune.choose_num_splits(q, k, k, 0.125, False, NATIVE_DECISION, _never) == 8
    assert os.listdir(tmp_path) == [], "nothing may be cached without a timing"


@pytest.mark.parametrize("blocker", ["compiling", "capturing"])
def test_no_timing_under_compile_or_graph_capture(monkeypatch, blocker):
    fake_cuda_q = types.SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0))
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: blocker == "compiling")
    monkeypatch.setattr(autotune, "_stream_capturing", lambda device: blocker == "capturing")
    reason = autotune.timing_blocker(fake_cuda_q)
    assert reason is not None and ("compile" if blocker == "compiling" else "graph") in reason
    assert autotune.choose_num_splits(fake_cuda_q, None, None, 0.125, False, NATIVE_DECISION,
                                      _never) == 8


def test_choose_num_splits_times_the_real_forward_per_g(monkeypatch):
    """The whole entry point on CPU tensors with the GPU parts faked: every candidate G reaches
    native_forward, the winner is cached for the bucket, and a shorter call in the same bucket
    gets it clamped to its own key blocks without timing."""
    ran = []
    monkeypatch.setattr(autotune, "timing_blocker", lambda q: None)
    monkeypatch.setattr(autotune, "device_label", lambda device: LABEL)
    monkeypatch.setattr(autotune, "_on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(_native, "native_forward",
                        lambda q, k, v, scale, causal, g: ran.append((scale, causal, g)))

    def timer(fn):
        fn()
        return 1.0 if ran[-1][2] == 48 else 2.0

    q, k = torch.empty(1, 64, 4, 64, dtype=torch.bfloat16), torch.empty(1, 8192, 4, 64)
    k = k.to(torch.bfloat16)
    assert autotune.choose_num_splits(q, k, k, 0.125, True, NATIVE_DECISION, timer) == 48
    assert sorted(g for _, _, g in ran) == CANDIDATES
    assert all(scale == 0.125 and causal for scale, causal, _ in ran)
    bucket = autotune.bucket_key(q, k, True, "hopper_wgmma")
    assert _read_cache()["buckets"][autotune._bucket_text(bucket)]["num_splits"] == 48

    short_k = k[:, :4100]  # same bucket (sk <= 8192), 33 key blocks
    assert autotune.choose_num_splits(q, short_k, short_k, 0.125, True, NATIVE_DECISION,
                                      _never) == 33


def test_candidates_follow_the_split_tiles_key_blocks(monkeypatch):
    """An unsplit call on wide Hopper tiles (64-key blocks) is tuned over the G that split calls
    can run: they clamp G to their own 128-key blocks, so neither a candidate nor the answer
    goes past those."""
    ran = []
    monkeypatch.setattr(autotune, "timing_blocker", lambda q: None)
    monkeypatch.setattr(autotune, "device_label", lambda device: LABEL)
    monkeypatch.setattr(autotune, "_on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(_native, "native_forward",
                        lambda q, k, v, scale, causal, g: ran.append(g))

    def timer(fn):  # more splits always time faster here
        fn()
        return 1.0 / ran[-1]

    wide = dict(NATIVE_DECISION, num_splits=1,
                details={"block_m": 256, "block_n": 64, "split_block_n": 128})
    q = torch.empty(1, 512, 4, 64, dtype=torch.bfloat16)
    k = torch.empty(1, 4000, 4, 64, dtype=torch.bfloat16)  # 32 key blocks of 128, 63 of 64
    g = autotune.choose_num_splits(q, k, k, 0.125, False, wide, timer)
    assert sorted(ran) == autotune.candidate_splits(1, 4000, 128)
    assert max(ran) <= 32 and g == 32


# ------------------------------------------------------------------ the hook in attn_fwd

def _qkv(dtype=torch.float32):
    return tuple(torch.randn(1, s, 2, 16, dtype=dtype) for s in (6, 9, 9))


def _raise_if_consulted(*args, **kwargs):
    raise AssertionError("autotune must not be consulted")


@pytest.mark.parametrize("flag", [None, "0", ""])
def test_flag_off_never_consults_autotune(monkeypatch, flag):
    if flag is not None:
        monkeypatch.setenv(autotune.ENV_FLAG, flag)
    monkeypatch.setattr(autotune, "choose_num_splits", _raise_if_consulted)
    q, k, v = _qkv()
    assert flashsplit.explain(q, k, v)["path"] == "reference"
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    ref_out, ref_lse = reference_attention(q, k, v, causal=True)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


class _FakeNative:
    """A native-path gate and a forward that records the G it was given (CPU-computed)."""

    def __init__(self):
        self.forward_splits = []

    def gate(self, q, k, v, causal, dropout_p, window_left, window_right, softcap, has_alibi,
             num_splits):
        return dict(NATIVE_DECISION, num_splits=max(num_splits, 8))

    def forward(self, q, k, v, softmax_scale, causal, num_splits):
        self.forward_splits.append(num_splits)
        return reference_attention(q, k, v, softmax_scale=softmax_scale, causal=causal)

    def run(self, q, k, v, softmax_scale, causal, dropout_p, window_left, window_right, softcap,
            has_alibi, num_splits):
        return self.forward(q, k, v, softmax_scale, causal, num_splits)


@pytest.fixture
def fake_native(monkeypatch):
    fake = _FakeNative()
    monkeypatch.setattr(_native, "gate_decision", fake.gate)
    monkeypatch.setattr(_native, "native_forward", fake.forward)
    monkeypatch.setattr(_native, "run", fake.run)
    return fake


def test_flag_on_native_auto_call_runs_the_tuned_g(monkeypatch, fake_native):
    asked = []

    def choose(q, k, v, softmax_scale, causal, decision):
        asked.append((softmax_scale, causal, decision["num_splits"]))
        return 6

    monkeypatch.setenv(autotune.ENV_FLAG, "1")
    monkeypatch.setattr(autotune, "choose_num_splits", choose)
    q, k, v = _qkv()
    out = flash_attn_func(q, k, v, causal=True, softmax_scale=0.3)
    assert asked == [(0.3, True, 8)]
    assert fake_native.forward_splits == [6]
    torch.testing.assert_close(out, reference_attention(q, k, v, softmax_scale=0.3,
                                                        causal=True)[0])


def test_flag_off_native_call_keeps_auto(monkeypatch, fake_native):
    monkeypatch.setattr(autotune, "choose_num_splits", _raise_if_consulted)
    flash_attn_func(*_qkv())
    assert fake_native.forward_splits == [0]


@pytest.mark.parametrize("num_splits", [1, 3])
def test_explicit_num_splits_is_never_tuned(monkeypatch, fake_native, num_splits):
    monkeypatch.setenv(autotune.ENV_FLAG, "1")
    monkeypatch.setattr(autotune, "choose_num_splits", _raise_if_consulted)
    flash_attn_func(*_qkv(), num_splits=num_splits)
    assert fake_native.forward_splits == [num_splits]
