"""The AMD build of the split-KV combine, executed on a CPU emulator of the CDNA ISA.

combine_kernel.cu is compiled for gfx942 and gfx950 (amd_toolchain.py) and launched as its
launcher launches it (same grid, block and arguments: AttnFwdParams packed from the real header,
lanes from core/combine_math.h's combine_lanes) on the emulator (amd_emulator.py), under the
default and the reversed wave order, with poisoned registers and LDS and poisoned outputs. The
result is compared with a float64 reference of the combine's definition.

Runs where FLASHSPLIT_AMD_EMU names the emulator harness; skips with that reason elsewhere.
The layout check of AttnFwdParams runs everywhere (it needs only g++).
"""

import os

import numpy as np

import amd_emulator as emu
import amd_toolchain as tc

COMBINE = os.path.join(tc.CSRC, "kernels", "combine_kernel.cu")
SPLITS = (2, 5, 17, 64)
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "fp16")
ORDERS = ("fwd", "rev")
# Output poison: a NaN pattern the kernel never writes (it writes the canonical quiet NaN).
POISON16, POISON32 = 0xFFFF, 0xFFFFFFFF


def test_attn_params_layout_matches_header():
    facts = emu.host_facts()  # raises LayoutError on any drift between PARAM_FIELDS and the header
    assert facts["sizeof"] % facts["alignof"] == 0
    packed = emu.attn_params({"b": 2, "num_splits": 5, "elem": "ElemType::kFloat16"}, {"out": "o"})
    assert len(packed.data) == facts["sizeof"]
    assert packed.pointers == {facts["fields"]["out"][0]: "o"}


# ---- cases and reference ---------------------------------------------------------------------------

def _shape(splits):
    # Odd row counts (b * h * sq); fewer rows where each row has many splits.
    return (1, 3, 5) if splits >= 17 else (1, 3, 7)


def make_case(splits, d, seed):
    """Partials of rows = b * h * sq query rows. Row 0: every split saw no key (-inf, partials
    unwritten: NaN garbage). Row 1: one split's LSE is NaN. Row 2: one split saw keys. Row 3: LSEs
    far apart. Elsewhere a fifth of the splits saw no key. The garbage of skipped splits is NaN,
    so reading it into the sums would show."""
    rng = np.random.default_rng(seed)
    b, h, sq = _shape(splits)
    rows = b * h * sq
    lse = rng.normal(0.0, 3.0, (splits, rows)).astype(np.float32)
    o = rng.normal(0.0, 1.0, (splits, rows, d)).astype(np.float32)
    empty = rng.random((splits, rows)) < 0.2
    empty[:, 0] = True
    empty[:, 2] = True
    empty[rng.integers(splits), 2] = False
    lse[empty] = -np.inf
    o[empty] = np.nan
    lse[rng.integers(splits), 1] = np.nan
    if rows > 3:
        lse[:, 3] = np.where(empty[:, 3], -np.inf, rng.uniform(-40, 40, splits)).astype(np.float32)
    return (b, h, sq), lse, o


def reference(lse, o):
    """float64 combine: LSE = log sum_g exp(LSE_g), O = sum_g exp(LSE_g - LSE) O_g; NaN if a
    split's LSE is NaN; O = 0 and LSE = -inf where no split saw a key."""
    splits, rows, d = o.shape
    out = np.zeros((rows, d))
    out_lse = np.full(rows, -np.inf)
    for r in range(rows):
        l64 = lse[:, r].astype(np.float64)
        if np.isnan(l64).any():
            out[r], out_lse[r] = np.nan, np.nan
            continue
        seen = l64 > -np.inf
        if not seen.any():
            continue
        m = l64[seen].max()
        w = np.exp(l64[seen] - m)
        out_lse[r] = m + np.log(w.sum())
        out[r] = (w[:, None] * o[seen, r].astype(np.float64)).sum(0) / w.sum()
    return out, out_lse


def _to_float(bits, dtype):
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16).astype(np.float64)


# ---- launches ---------------------------------------------------------------------------------------------

def combine_launch(code_object, symbol, max_threads, dtype, d, splits, order, seed):
    (b, h, sq), lse, o = make_case(splits, d, seed)
    rows = b * h * sq
    # The output has a padded row stride; the padding keeps its poison.
    row_stride = h * d + 8
    facts = emu.host_facts()
    lanes = facts["combine_lanes"][(splits, d)]
    # A row takes d / 4 * lanes consecutive threads of the grid (core/combine_math.h).
    blocks = -(-(rows * (d // 4) * lanes) // max_threads)
    buffers = {
        "o_accum": np.ascontiguousarray(o.reshape(-1)),
        "lse_accum": np.ascontiguousarray(lse.reshape(-1)),
        "out": np.full(b * sq * row_stride, POISON16, np.uint16),
        "lse": np.full(rows, POISON32, np.uint32),
    }
    params = emu.attn_params(
        {"elem": "ElemType::kBFloat16" if dtype == "bf16" else "ElemType::kFloat16",
         "b": b, "sq": sq, "sk": 1, "h": h, "hk": h, "d": d, "dv": d,
         "num_splits": splits, "softmax_scale": 1.0,
         "o_batch_stride": sq * row_stride, "o_row_stride": row_stride, "o_head_stride": d},
        {"out": "out", "lse": "lse", "o_accum": "o_accum", "lse_accum": "lse_accum"})
    lanes_log2 = lanes.bit_length() - 1
    launch = emu.Launch(code_object, symbol, grid=(blocks, 1, 1),
                        block=(max_threads, 1, 1),
                        args=[params, emu.Value(int(lanes_log2).to_bytes(4, "little"))],
                        buffers=buffers, order=order, poison=True,
                        label=f"{dtype} d={d} G={splits} {order}")
    expect = reference(lse, o)
    return launch, (b, h, sq, row_stride), expect


def check_combine(launch, shape, expect, dtype):
    """Problems found in a finished launch (empty when it matches the reference)."""
    b, h, sq, row_stride = shape
    d = expect[0].shape[1]
    out_bits = launch.buffers["out"].reshape(b, sq, row_stride)
    lse_bits = launch.buffers["lse"]
    problems = []
    pad = out_bits[:, :, h * d:]
    if np.any(pad != POISON16):
        problems.append("wrote into the output's row padding")
    body = out_bits[:, :, :h * d].reshape(b, sq, h, d).transpose(0, 2, 1, 3).reshape(-1, d)
    if np.any(body == POISON16) or np.any(lse_bits == POISON32):
        problems.append("left poisoned outputs unwritten")
    got = _to_float(body, dtype)
    got_lse = lse_bits.view(np.float32).astype(np.float64)
    ref, ref_lse = expect
    if np.any(np.isnan(got) != np.isnan(ref)) or np.any(np.isnan(got_lse) != np.isnan(ref_lse)):
        problems.append("NaN where the reference has none, or a number where it has NaN")
    if np.any(np.isneginf(got_lse) != np.isneginf(ref_lse)):
        problems.append("-inf LSE mismatch")
    empty = np.isneginf(ref_lse)
    if np.any(got[empty] != 0):
        problems.append("rows that saw no key are not 0")
    finite = ~np.isnan(ref) & ~np.isnan(got)
    rtol = 2.0 ** -8 if dtype == "bf16" else 2.0 ** -10  # one 16-bit rounding, with margin
    out_err = np.max(np.abs(got - ref)[finite] / (np.abs(ref[finite]) * rtol + 1e-5), initial=0)
    lse_ok = np.isfinite(ref_lse) & np.isfinite(got_lse)
    lse_diff = np.abs(got_lse[lse_ok] - ref_lse[lse_ok])
    lse_err = np.max(lse_diff / (1e-5 * (1 + np.abs(ref_lse[lse_ok]))), initial=0)
    if out_err > 1:
        problems.append(f"output error {out_err:.2f} x tolerance")
    if lse_err > 1:
        problems.append(f"LSE error {lse_err:.2f} x tolerance")
    abs_err = np.max(np.abs(got - ref)[finite], initial=0)
    return problems, abs_err, np.max(lse_diff, initial=0)


def test_combine_on_emulator(tmp_path, capsys):
    emu.require_emulator()
    launches, checks = [], []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        build = tc.compile_source(COMBINE, target, str(tmp_path))
        kernels = {k["name"]: k for k in tc.kernel_metadata(build.code_object)}
        names = tc.demangle(list(kernels))
        for dtype in DTYPES:
            for d in HEAD_DIMS:
                elem = "__hip_bfloat16" if dtype == "bf16" else "__half"
                symbol = next(n for n, dm in names.items()
                              if f"combine_kernel<{elem}, {d}>" in dm)
                max_threads = kernels[symbol]["max_flat_workgroup_size"]
                for splits in SPLITS:
                    for order in ORDERS:
                        launch, shape, expect = combine_launch(
                            build.code_object, symbol, max_threads, dtype, d, splits, order,
                            seed=1000 * splits + d + (dtype == "fp16"))
                        launch.label = f"{target} " + launch.label
                        launches.append(launch)
                        checks.append((shape, expect, dtype))
    results = emu.run_launches(launches)

    header = f"{'target':7} {'dtype':5} {'d':>4} {'G':>3} {'rows':>4} {'order':5} " \
             f"{'|out-ref|':>10} {'|lse-ref|':>10} {'wave insts':>10} {'s':>6}  result"
    lines, failures = [header], []
    for launch, result, (shape, expect, dtype) in zip(launches, results, checks):
        target, rest = launch.label.split(" ", 1)
        _, d, splits, order = rest.split(" ")
        rows = expect[1].shape[0]
        if not result.ok:
            lines.append(f"{target:7} {dtype:5} {d[2:]:>4} {splits[2:]:>3} {rows:>4} {order:5} "
                         f"{'':>10} {'':>10} {'':>10} {'':>6}  ERROR {result.error[:200]}")
            failures.append(f"{launch.label}: {result.error}")
            continue
        problems, out_err, lse_err = check_combine(launch, shape, expect, dtype)
        lines.append(f"{target:7} {dtype:5} {d[2:]:>4} {splits[2:]:>3} {rows:>4} {order:5} "
                     f"{out_err:10.2e} {lse_err:10.2e} {result.wave_insts:10d} "
                     f"{result.wall_s:6.2f}  {'PASS' if not problems else 'FAIL ' + '; '.join(problems)}")
        if problems:
            failures.append(f"{launch.label}: {'; '.join(problems)}")
    emu.report(capsys, lines, failures)


def test_workgroup_subset_on_emulator(tmp_path):
    """A launch of a few workgroups of a grid (how large attention grids are sampled): the
    columns those workgroups' threads own are combined, every other column keeps its poison. At
    G = 64 a row's 8 lanes per column group make it 256 threads, so each row spans two
    workgroups and the first and last ones hold half a row each."""
    emu.require_emulator()
    compiler, why = tc.find_compiler("gfx942")
    if compiler is None:
        tc.missing_compiler_outcome(why)
    build = tc.compile_source(COMBINE, "gfx942", str(tmp_path))
    kernels = {k["name"]: k for k in tc.kernel_metadata(build.code_object)}
    symbol = next(n for n, dm in tc.demangle(list(kernels)).items()
                  if "combine_kernel<__hip_bfloat16, 128>" in dm)
    launch, shape, expect = combine_launch(build.code_object, symbol,
                                           kernels[symbol]["max_flat_workgroup_size"], "bf16", 128,
                                           64, "rev", seed=9)
    last = launch.grid[0] - 1
    launch.workgroups = [(0, 0, 0), (last, 0, 0)]
    (result,) = emu.run_launches([launch])
    assert result.ok, result.error
    assert result.workgroups == 2
    b, h, sq, row_stride = shape
    d = 128
    lanes = emu.host_facts()["combine_lanes"][(64, d)]
    # Column group c (4 columns) of row r is the lanes at threads (r * d / 4 + c) * lanes on.
    groups = np.arange(b * h * sq * (d // 4)).reshape(-1, d // 4)
    ran = np.isin(groups * lanes // launch.block[0], [0, last])
    assert ran.any() and not ran.all()
    ran_cols = np.repeat(ran, 4, axis=1)
    body = launch.buffers["out"].reshape(b, sq, row_stride)[:, :, :h * d]
    body = body.reshape(b, sq, h, d).transpose(0, 2, 1, 3).reshape(-1, d)
    assert np.all(body[ran_cols] != POISON16)
    assert np.all(body[~ran_cols] == POISON16)
    # The lse of a row is written by its first column group's first lane.
    assert np.array_equal(launch.buffers["lse"] != POISON32, ran[:, 0])
    ref, _ = expect
    got = _to_float(body[ran_cols], "bf16")
    want = ref[ran_cols]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.all(np.abs(got[ok] - want[ok]) <= np.abs(want[ok]) * 2.0 ** -8 + 1e-5)


# ---- MFMA layouts on the emulator -------------------------------------------------------------------

MFMA_PROBE = os.path.join(tc.REPO, "tests", "amd", "mfma_probe.hip")
# mfma_layout.h's Mfma enumerators, in order: (m, n, k).
MFMA_SHAPES = ((32, 32, 8), (16, 16, 16), (16, 16, 32), (32, 32, 16))


def _bits16(values, dtype):
    if dtype == "bf16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(np.float16).view(np.uint16)


def test_mfma_layouts_on_emulator(tmp_path, capsys):
    """gfx9/mfma.h driven by mfma_layout.h's maps (tests/amd/mfma_probe.hip) multiplies
    exactly-representable matrices exactly, for every MFMA shape the target has."""
    emu.require_emulator()
    rng = np.random.default_rng(3)
    launches, expected = [], []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        build = tc.compile_source(MFMA_PROBE, target, str(tmp_path), extra_flags=[f"-I{tc.REPO}"])
        names = tc.demangle([k["name"] for k in tc.kernel_metadata(build.code_object)])
        for symbol, demangled in sorted(names.items(), key=lambda kv: kv[1]):
            index = int(demangled.split("(flashsplit::gfx9::Mfma)")[1][0])
            dtype = "bf16" if "bfloat16" in demangled else "fp16"
            m, n, k = MFMA_SHAPES[index]
            # Small integers times powers of two: every product and sum is exact in fp32.
            a = rng.integers(-4, 5, (m, k)) * 2.0 ** rng.integers(-1, 2, (m, k))
            b = rng.integers(-4, 5, (k, n)) * 2.0 ** rng.integers(-1, 2, (k, n))
            buffers = {"a": _bits16(a, dtype).reshape(-1), "b": _bits16(b, dtype).reshape(-1),
                       "d": np.full(m * n, np.nan, np.float32)}
            launches.append(emu.Launch(build.code_object, symbol, grid=(1, 1, 1), block=(64, 1, 1),
                                       args=[emu.Buffer("a"), emu.Buffer("b"), emu.Buffer("d")],
                                       buffers=buffers, order="fwd", poison=True,
                                       label=f"{target} {m}x{n}x{k} {dtype}"))
            expected.append(a @ b)
    results = emu.run_launches(launches)
    lines, failures = [f"{'MFMA (layouts + gfx9/mfma.h)':34} {'wrong':>7} {'wave insts':>10}  result"], []
    for launch, result, want in zip(launches, results, expected):
        if not result.ok:
            failures.append(f"{launch.label}: {result.error}")
            lines.append(f"{launch.label:34} {'':>7} {'':>10}  ERROR {result.error[:200]}")
            continue
        got = launch.buffers["d"].reshape(want.shape).astype(np.float64)
        wrong = int(np.sum(~(got == want)))  # NaN counts as wrong
        lines.append(f"{launch.label:34} {wrong:>4}/{want.size:<4} {result.wave_insts:10d}  "
                     f"{'PASS' if wrong == 0 else 'FAIL'}")
        if wrong:
            failures.append(f"{launch.label}: {wrong} of {want.size} entries differ from A @ B")
    emu.report(capsys, lines, failures)


# ---- the HIP shim on the emulator ---------------------------------------------------------------------

SHIM_PROBE = os.path.join(tc.REPO, "tests", "amd", "shim_probe.hip")


def _special_inputs(n, rng):
    x = rng.normal(0.0, 4.0, n).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 70000.0, 1e-8,
                        -1e-30, 3.0e38, 2.0 ** -24, 2.0 ** -25, 88.0, -104.0], np.float32)
    x[:special.size] = special
    # Ties and near-ties of both 16-bit formats: 1 + 2^-8 (bf16 tie, rounds to even: 1),
    # 1 + 3 * 2^-8 (bf16 tie, rounds up), 1 + 2^-11 (fp16 tie), 1 + 2^-11 + 2^-20 (above it).
    ties = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 2 ** -11 + 2 ** -20,
                     -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -20], np.float32)
    x[special.size:special.size + ties.size] = ties
    return x


def test_hip_shim_on_emulator(tmp_path):
    emu.require_emulator()
    grid, block = (3, 2, 2), (32, 2, 2)
    threads, blocks = 128, 12
    n = threads * blocks
    x = _special_inputs(n, np.random.default_rng(5))
    launches = []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        build = tc.compile_source(SHIM_PROBE, target, str(tmp_path))
        (kernel,) = tc.kernel_metadata(build.code_object)
        buffers = {"x": x.copy(), "ids": np.full(n * 12, 0xFFFFFFFF, np.uint32),
                   "shuffled": np.full(n * 7, np.nan, np.float32),
                   "bf16": np.full(n, 0xFFFF, np.uint16), "fp16": np.full(n, 0xFFFF, np.uint16),
                   "math": np.full(n * 4, np.nan, np.float32)}
        launches.append(emu.Launch(build.code_object, kernel["name"], grid=grid, block=block,
                                   args=[emu.Buffer(b) for b in ("x", "ids", "shuffled", "bf16",
                                                                 "fp16", "math")],
                                   buffers=buffers, order="rev", poison=True, label=target))
    results = emu.run_launches(launches)
    for launch, result in zip(launches, results):
        assert result.ok, f"{launch.label}: {result.error}"
        out = launch.buffers
        g = np.arange(n)
        block_id, local = g // threads, g % threads
        tx, ty, tz = local % 32, local // 32 % 2, local // 64
        bx, by, bz = block_id % 3, block_id // 3 % 2, block_id // 6
        want_ids = np.stack([tx, ty, tz, bx, by, bz] + [np.full(n, v) for v in block + grid], 1)
        np.testing.assert_array_equal(out["ids"].reshape(n, 12), want_ids, err_msg=launch.label)
        # Shuffles: lanes are the workgroup's threads in order, 64 to a wave.
        v = (block_id * threads + (threads - 1 - local)).astype(np.float64)
        lane = local % 64
        wave_base = g - lane
        def at(lanes):
            return v[wave_base + lanes]
        sh = out["shuffled"].reshape(n, 7).astype(np.float64)
        np.testing.assert_array_equal(sh[:, 0], v, err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 1], at(lane ^ 1), err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 2], at(lane ^ 8), err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 3], at(lane ^ 32), err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 4], wave_base + (lane ^ 3), err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 5], at(lane ^ 4), err_msg=launch.label)
        np.testing.assert_array_equal(sh[:, 6], v, err_msg=launch.label)
        # Conversions: round to nearest even; NaN stays NaN; overflow goes to infinity.
        with np.errstate(over="ignore"):
            want_fp16 = x.astype(np.float16)
        got_fp16 = out["fp16"].view(np.float16)
        nan = np.isnan(x)
        assert np.all(np.isnan(got_fp16[nan])), launch.label
        np.testing.assert_array_equal(got_fp16[~nan].view(np.uint16), want_fp16[~nan].view(np.uint16),
                                      err_msg=launch.label)
        bits = x.view(np.uint32).astype(np.uint64)
        want_bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # RNE
        got_bf16 = out["bf16"]
        assert np.all((got_bf16[nan] & 0x7F80) == 0x7F80) and np.all(got_bf16[nan] & 0x7F), launch.label
        np.testing.assert_array_equal(got_bf16[~nan], want_bf16[~nan], err_msg=launch.label)
        # Float math against float64, to a few float ulps (the AMDGPU expansions are ~1 ulp).
        m = out["math"].reshape(n, 4).astype(np.float64)
        x64 = x.astype(np.float64)
        with np.errstate(all="ignore"):
            want = np.stack([np.exp(x64), np.log(np.abs(x64)), np.exp2(np.fmin(x64, 100.0)),
                             np.log2(np.fmax(x64, 1e-30))], 1).astype(np.float32).astype(np.float64)
        same_class = (np.isnan(m) == np.isnan(want)) & (np.isinf(m) == np.isinf(want))
        assert same_class.all(), f"{launch.label}: NaN/inf differ at {np.argwhere(~same_class)[:5]}"
        finite = np.isfinite(want)
        ulp = np.spacing(np.abs(want[finite]).astype(np.float32)).astype(np.float64)
        err = np.abs(m[finite] - want[finite]) / ulp
        assert err.max() <= 4, f"{launch.label}: float math off by {err.max():.1f} ulp"
        assert np.array_equal(m[~finite], want[~finite], equal_nan=True), launch.label
