"""The benchmarks' interleaved timer, on a simulated GPU clock (no GPU needed).

A fake torch.cuda records events on a clock that each timed call advances by its cost, with a
drift that slows every call made later: the situation interleaving is there to handle.
"""

import os
import sys
import types

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _timing as T  # noqa: E402


class FakeGpu:
    def __init__(self, drift_per_call=0.0, first_of=0, first_penalty=0.0):
        self.now_ms = 0.0
        self.calls = []        # names of the functions, in the order they ran
        self.drift_per_call = drift_per_call
        # Every first_of-th call (counted from the first) is slower by first_penalty: the first
        # place of each interleaved repetition, once warm-up and probes are done.
        self.first_of = first_of
        self.first_penalty = first_penalty
        self.timed_from = None  # index of the first timed call (set by the test)

    def run(self, name, cost_ms):
        slowdown = 1.0 + self.drift_per_call * len(self.calls)
        if self.first_of and self.timed_from is not None:
            if (len(self.calls) - self.timed_from) % self.first_of == 0:
                slowdown += self.first_penalty
        self.calls.append(name)
        self.now_ms += cost_ms * slowdown

    def torch(self):
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.at = None

            def record(self):
                self.at = gpu.now_ms

            def elapsed_time(self, end):
                return end.at - self.at

        cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None,
                                     _sleep=lambda cycles: None)
        return types.SimpleNamespace(cuda=cuda)

    def fn(self, name, cost_ms):
        return lambda *args: self.run(name, cost_ms)


def test_each_repetition_times_every_function_once_in_a_changing_order():
    gpu = FakeGpu()
    fns = [gpu.fn("a", 1.0), gpu.fn("b", 2.0), gpu.fn("c", 3.0)]
    timings = T.time_cuda_interleaved(gpu.torch(), fns, [()], warmup=2, reps=6)
    timed = gpu.calls[-18:]
    reps = [timed[i:i + 3] for i in range(0, 18, 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in reps)
    # every function takes every place of a repetition equally often (twice in 6)
    for place in range(3):
        assert sorted(r[place] for r in reps) == ["a", "a", "b", "b", "c", "c"]
    assert len({tuple(r) for r in reps}) > 1
    # warm-up (2 each) and the host-launch probe (3 each) come first, per function
    assert gpu.calls[:15] == ["a"] * 2 + ["b"] * 2 + ["c"] * 2 + ["a"] * 3 + ["b"] * 3 + \
        ["c"] * 3
    assert [t["median_ms"] for t in timings] == pytest.approx([1.0, 2.0, 3.0])
    assert all(t["reps"] == 6 for t in timings)


def test_a_slow_first_place_falls_on_every_function_alike():
    # A call in the first place of a repetition runs 10% slower (on a power-capped H100 the first
    # place of a fixed order of four methods reads 2-3% slower). With one fixed order the first
    # function would read 10% slow; with the places shared, every function's median reads
    # the same.
    gpu = FakeGpu(first_of=3, first_penalty=0.10)
    gpu.timed_from = 3 * 3  # no warm-up; the probe's 3 calls per function come first
    fns = [gpu.fn(name, 1.0) for name in "abc"]
    timings = T.time_cuda_interleaved(gpu.torch(), fns, [()], warmup=0, reps=9)
    assert [t["median_ms"] for t in timings] == pytest.approx([1.0, 1.0, 1.0])


def test_drift_falls_on_every_function_alike():
    # Two equal functions on a GPU that slows 1% per call: timed one after the other the
    # second reads ~10% slower; interleaved they read within the drift of one round.
    gpu = FakeGpu(drift_per_call=0.01)
    torch = gpu.torch()
    first = T.time_cuda(torch, gpu.fn("a", 1.0), [()], warmup=0, reps=9)
    second = T.time_cuda(torch, gpu.fn("b", 1.0), [()], warmup=0, reps=9)
    assert second["median_ms"] / first["median_ms"] > 1.08

    gpu = FakeGpu(drift_per_call=0.01)
    a, b = T.time_cuda_interleaved(gpu.torch(), [gpu.fn("a", 1.0), gpu.fn("b", 1.0)], [()],
                                   warmup=0, reps=9)
    assert b["median_ms"] / a["median_ms"] == pytest.approx(1.0, abs=0.012)


def test_inputs_rotate_call_by_call_across_functions():
    # Where several input sets rotate (one fits in L2), no timed call may read the set the call
    # before it read, or it would find that set's inputs in L2: the calls take the sets in turn,
    # whichever function makes them.
    gpu = FakeGpu()
    order = []  # (function, set) of every call, in order

    def make(name):
        def fn(x):
            order.append((name, x))
            gpu.run(name, 1.0)
        return fn

    T.time_cuda_interleaved(gpu.torch(), [make("a"), make("b")], [(0,), (1,), (2,)],
                            warmup=0, reps=6)
    timed = order[-12:]
    assert sorted(name for name, _ in timed) == ["a"] * 6 + ["b"] * 6
    sets = [x for _, x in timed]
    assert sets == [0, 1, 2] * 4
    for name in "ab":
        assert len({x for n, x in timed if n == name}) > 1


def test_one_input_set_serves_every_call():
    gpu = FakeGpu()
    seen = []

    def fn(x):
        seen.append(x)
        gpu.run("a", 1.0)

    T.time_cuda_interleaved(gpu.torch(), [fn, fn], [(7,)], warmup=0, reps=3)
    assert seen[-6:] == [7] * 6


def test_time_cuda_is_the_single_function_case():
    gpu = FakeGpu()
    timing = T.time_cuda(gpu.torch(), gpu.fn("a", 0.5), [()], warmup=1, reps=4)
    assert timing["median_ms"] == pytest.approx(0.5)
    assert timing["p10_ms"] == pytest.approx(0.5) and timing["p90_ms"] == pytest.approx(0.5)
    assert timing["reps"] == 4


def test_time_rows_interleaved_fills_each_rows_columns():
    gpu = FakeGpu()
    rows = [{"name": "a"}, {"name": "b"}]
    timed = [(rows[0], gpu.fn("a", 1.0)), (rows[1], gpu.fn("b", 2.0))]
    timings = T.time_rows_interleaved(gpu.torch(), timed, [()], warmup=0, reps=3,
                                      max_seconds=10.0, flops=2e9)
    assert [t["median_ms"] for t in timings] == pytest.approx([1.0, 2.0])
    assert rows[0]["ms"] == pytest.approx(1.0) and rows[1]["p90_ms"] == pytest.approx(2.0)
    assert rows[0]["tflops"] == pytest.approx(2e9 / 1e-3 / 1e12)  # 2 GFLOP in 1 ms
    untimed = {"name": "c"}
    T.time_rows_interleaved(gpu.torch(), [(untimed, gpu.fn("c", 1.0))], [()], warmup=0, reps=3,
                            max_seconds=10.0)
    assert "tflops" not in untimed and untimed["ms"] == pytest.approx(1.0)
    assert T.time_rows_interleaved(gpu.torch(), [], [()], 0, 3, 10.0) == []


def test_a_time_budget_stop_keeps_the_places_balanced(monkeypatch):
    # A clock that runs 1 s per reading: the budget is spent at the first check, which comes
    # only at the end of a block of places (6 repetitions for 3 functions).
    ticks = iter(range(10 ** 6))
    monkeypatch.setattr(T.time, "perf_counter", lambda: float(next(ticks)))
    gpu = FakeGpu()
    fns = [gpu.fn(name, 1.0) for name in "abc"]
    timings = T.time_cuda_interleaved(gpu.torch(), fns, [()], warmup=0, reps=30,
                                      max_seconds=0.5)
    assert all(t["reps"] == 6 for t in timings)
    timed = gpu.calls[-18:]
    reps = [timed[i:i + 3] for i in range(0, 18, 3)]
    for place in range(3):
        assert sorted(r[place] for r in reps) == ["a", "a", "b", "b", "c", "c"]
