"""The split tuner's fitting side (no GPU): it scores and searches with the C++ model it binds
(flashsplit._C.heuristic), reads its constants from and prints them for split_heuristic.h, and
keeps the raw CSV format its measurements write."""

import csv
import math
import os
import sys

import pytest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)

import tune_num_splits as tune  # noqa: E402

H = tune.heuristic()
H100 = H.DeviceInfo(vendor="nvidia", cc=90, sm_count=132)
HOPPER_BUILD = H.BuildInfo(gpu_kernels_built=True, archs=[80, 90], head_dims=[64, 128],
                           hopper_kernels_built=True)
CANDIDATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)

# (b, h, hk, sq, sk, d, causal): decode, GQA, split prefill and full grids, both families;
# the first three split fewer ways with a dearer combine (test_search_...).
SHAPES = [
    (1, 16, 16, 64, 1024, 64, False),
    (1, 16, 16, 128, 2048, 128, False),
    (1, 32, 8, 16, 4096, 128, False),
    (1, 16, 16, 1, 8192, 64, False),
    (4, 32, 8, 1, 32768, 128, True),
    (1, 8, 1, 16, 65536, 128, False),
    (1, 16, 16, 128, 65536, 64, False),
    (2, 8, 8, 1536, 16384, 128, False),
    (1, 8, 8, 2048, 32768, 64, False),
    (2, 32, 8, 256, 16384, 64, True),
    (8, 16, 16, 1024, 1024, 128, True),
    (4, 16, 16, 4096, 4096, 64, False),
]


def problem_of(shape):
    b, h, hk, sq, sk, d, causal = shape
    return H.AttnProblem(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)


def rows_of(shape, times, heuristic_g):
    """The raw rows a measurement of shape writes, with times {G: ms}."""
    b, h, hk, sq, sk, d, causal = shape
    problem = problem_of(shape)
    family = H.check_native(problem, H100, HOPPER_BUILD).family
    tiles = H.tiles_for_run(family, problem, 132, heuristic_g)
    common = dict(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal, dtype="bf16", sms=132,
                  kernel=family, block_m=tiles.block_m, block_n=tiles.block_n,
                  blocks_per_sm=tiles.blocks_per_sm,
                  key_blocks=-(-sk // H.tiles_for(family, problem).block_n),
                  grid_blocks=H.forward_blocks(problem, tiles), heuristic_g=heuristic_g)
    return [dict(common, requested_g=g, g=g, ms=ms, p10_ms=ms, p90_ms=ms, status="ok")
            for g, ms in sorted(times.items())]


def planted(shape, best_g, recorded_g):
    """Times of every candidate G (and best_g): 1.0 ms at best_g, 1.3 ms elsewhere."""
    problem = problem_of(shape)
    family = H.check_native(problem, H100, HOPPER_BUILD).family
    blocks = -(-problem.sk // H.tiles_for(family, problem).block_n)
    gs = {g for g in CANDIDATES if g <= blocks} | {best_g, recorded_g}
    return rows_of(shape, {g: 1.0 if g == best_g else 1.3 for g in gs}, recorded_g)


def write_csv(path, rows, fields=tune.RAW_FIELDS):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def cpp_g(shape, constants=None):
    problem = problem_of(shape)
    family = H.check_native(problem, H100, HOPPER_BUILD).family
    return H.resolve_splits_for(family, problem, H100, 0, constants)


def report(capsys, argv):
    assert tune.main(argv) == 0
    return capsys.readouterr().out


def section(text, title):
    """The summary line of a report section."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("== " + title))
    return lines[start + 1]


def test_evaluate_reproduces_the_cpp_heuristic(tmp_path, capsys):
    gs = [cpp_g(shape) for shape in SHAPES]
    assert len(set(gs)) >= 4 and 1 in gs, gs  # the shapes exercise several choices
    rows = [row for shape, g in zip(SHAPES, gs) for row in planted(shape, g, g)]
    path = write_csv(tmp_path / "raw.csv", rows)
    text = report(capsys, ["--evaluate", path])
    summary = section(text, "C++ heuristic")
    assert f"shapes {len(SHAPES)}  regret geomean 1.0000  worst 1.000" in summary, text
    assert f"gives the recorded G on {len(SHAPES)}/{len(SHAPES)} shapes" in text
    # The model of each row is the binding's, whatever the row recorded.
    shapes = tune.attach_models(tune.load_raw(path), 90)
    chooser = tune.model_chooser(H.SplitHeuristicConstants())
    assert [chooser(entry) for entry in shapes.values()] == gs


def test_evaluate_scores_the_recorded_g_apart_from_the_model(tmp_path, capsys):
    rows = [row for shape in SHAPES for row in planted(shape, cpp_g(shape), 1)]
    text = report(capsys, ["--evaluate", write_csv(tmp_path / "raw.csv", rows)])
    assert "regret geomean 1.0000" in section(text, "C++ heuristic")
    assert "worst 1.300" in section(text, "flashsplit heuristic (G recorded by explain")
    split = sum(cpp_g(shape) != 1 for shape in SHAPES)
    assert f"gives the recorded G on {len(SHAPES) - split}/{len(SHAPES)} shapes" in text


def test_a_call_on_key_warps_scores_its_own_time(tmp_path, capsys):
    """A requested G runs one-warp blocks; where the call left to the heuristic ran key warps,
    its row (requested_g 0) is the recorded choice's time, and the model is scored on the split
    candidates alone."""
    shape = (16, 32, 4, 1, 8192, 64, False)
    rows = planted(shape, 4, 1)
    auto = dict(rows[0], requested_g=tune.AUTO, g=1, ms=0.95, p10_ms=0.95, p90_ms=0.95,
                key_warps=4)
    path = write_csv(tmp_path / "raw.csv", rows + [auto])
    entry = next(iter(tune.load_raw(path).values()))
    assert entry["auto_ms"] == 0.95 and tune.AUTO not in entry["times"]
    text = report(capsys, ["--evaluate", path])
    recorded = section(text, "flashsplit heuristic (G recorded by explain")
    assert "regret geomean 0.9500" in recorded, text
    assert "chose G=1 on key warps 0.95 ms, best G=4 1 ms" in text, text
    g1 = section(text, "always G=1")
    assert "regret geomean 1.3000" in g1, text
    # Without the row the recorded G=1 is the one-warp call's time.
    text = report(capsys, ["--evaluate", write_csv(tmp_path / "old.csv", rows)])
    assert "regret geomean 1.3000" in section(text, "flashsplit heuristic (G recorded by explain")


def test_csv_without_the_kernel_column_ran_the_portable_kernels(tmp_path, capsys):
    shape = (1, 16, 16, 128, 65536, 64, False)
    portable_g = H.resolve_splits_for("portable_mma", problem_of(shape), H100, 0)
    rows = planted(shape, portable_g, portable_g)
    fields = [f for f in tune.RAW_FIELDS if f != "kernel"]
    text = report(capsys, ["--evaluate", write_csv(tmp_path / "old.csv", rows, fields)])
    assert "(kernel: portable_mma 1)" in text
    assert "regret geomean 1.0000" in section(text, "C++ heuristic")


def test_held_out_shapes(tmp_path, capsys):
    rows = [row for shape in SHAPES for row in planted(shape, cpp_g(shape), cpp_g(shape))]
    path = write_csv(tmp_path / "all.csv", rows)
    seen = write_csv(tmp_path / "seen.csv", [row for row in rows if row["sq"] == 1])
    text = report(capsys, ["--evaluate", path, "--exclude-shapes-in", seen])
    held = sum(shape[3] != 1 for shape in SHAPES)
    assert f"held out: {held} of {len(SHAPES)} shapes" in text


def test_constants_round_trip():
    defaults = H.SplitHeuristicConstants()
    assert tune.constants_from(tune.parse_args([])) == defaults
    args = tune.parse_args(["--combine-us", "4.5", "--max-splits", "64",
                            "--dram-bytes-per-us", "3.1e6"])
    assert tune.constants_from(args) == defaults.replace(combine_us=4.5, max_splits=64,
                                                         dram_bytes_per_us=3.1e6)
    with pytest.raises(SystemExit):
        tune.parse_args(["--max-splits", "6.5"])
    # Every field has a flag, and what is printed for split_heuristic.h reads back the same.
    for field, value in defaults.as_dict().items():
        changed = value * 2 if isinstance(value, int) else value * 1.25 or 1.0
        args = tune.parse_args(["--" + field.replace("_", "-"), str(changed)])
        constants = tune.constants_from(args)
        assert constants == defaults.replace(**{field: changed})
        (line,) = tune.cpp_lines(constants, defaults)
        declaration, was = line.split(";  // was ")
        kind, name, _, literal = declaration.split()
        assert (kind, name) == ("int" if isinstance(value, int) else "double", field)
        assert type(value)(literal) == changed and type(value)(was) == value
    assert tune.cpp_literal(3.2e6) == "3.2e6" and tune.cpp_literal(0.05) == "0.05"


def test_search_improves_a_planted_regret(tmp_path):
    """The best G of every shape is the one the heuristic picks with a dearer combine and
    split; the search, starting from the defaults, finds constants that pick it."""
    target = H.SplitHeuristicConstants(combine_us=6.0, split_latency_us=0.8)
    differs = [shape for shape in SHAPES if cpp_g(shape, target) != cpp_g(shape)]
    assert len(differs) >= 3
    rows = [row for shape in SHAPES for row in planted(shape, cpp_g(shape, target),
                                                       cpp_g(shape))]
    shapes = tune.attach_models(tune.load_raw(write_csv(tmp_path / "raw.csv", rows)), 90)
    start = H.SplitHeuristicConstants()
    before = tune.score(shapes, tune.model_chooser(start))
    assert before["geomean"] > 1.01
    grid = dict(combine_us=(2.0, 3.0, 6.0), split_latency_us=(0.4, 0.8))
    best, lines = tune.search(shapes, start, grid=grid, rounds=2)
    after = tune.score(shapes, tune.model_chooser(best))
    assert after["geomean"] == pytest.approx(1.0) and after["worst"][0][0] == 1.0
    assert best != start
    assert any("to put back into csrc/core/split_heuristic.h" in line for line in lines)
    assert tune.search(shapes, best, grid=grid, rounds=1)[1][-1].endswith(
        "no value of the grid improves on the starting constants")


def test_pick_time_borrows_only_equivalent_splits():
    times = {1: 3.0, 4: 1.0}
    assert tune.pick_time(times, 4, 10) == 1.0
    assert tune.pick_time(times, 5, 10) is None  # ceil(10 / 5) = 2 blocks, G=4 walks 3
    assert tune.pick_time(times, 5, 8) == 1.0  # both walk 2 of 8 blocks
    assert tune.pick_time(times, 5, 8, unstable={5}) is None
    assert math.isclose(tune.pick_time(times, 1, 8), 3.0)


def test_the_decode_grid_is_bench_kvcache_s_draw_as_decode_shapes():
    import bench_kvcache
    shapes = tune.decode_grid_shapes(20, seed=5)
    assert [(s["b"], s["sq"], s["h"], s["hk"], s["sk"], s["d"]) for s in shapes] == \
        bench_kvcache.grid_shapes(20, 5)
    assert all(s["causal"] is False for s in shapes)
    assert tune.parse_args(["--decode-grid", "20"]).decode_grid == 20


@pytest.mark.parametrize("name", ["h200_decode_grid_fit", "h200_decode_grid_validation"])
def test_the_h200_decode_sets_score_as_the_design_notes_say(name, capsys):
    path = os.path.join(BENCH, "data", name + ".csv")
    tune.main(["--evaluate", path, "--slots-per-sm-narrow", "3"])
    out = capsys.readouterr().out
    section = out.split("== C++ heuristic")[1].split("==")[0]
    geomean = float(section.split("regret geomean")[1].split()[0])
    worst = float(section.split("worst")[1].split()[0])
    assert geomean <= 1.006 and worst <= 1.07, section
