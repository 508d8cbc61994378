"""Every AMD translation unit compiles for every gfx9 target, and every kernel in it stays within
its resource budget.

For each of csrc/kernels/combine_kernel.cu and csrc/kernels/gfx9/*.cu, on gfx90a and gfx942
(clang-19) and gfx950 (a clang that knows it, e.g. zig's clang 22), the device code is compiled
and linked against the project's HIP shim (amd_toolchain.py) and each kernel's metadata is read.
A kernel fails on any scratch (private segment) or spill, on static LDS over the target's limit
(the gfx9 kernels size their __shared__ storage from template parameters, so the metadata's
group segment is the whole of it), on occupancy below its budget, and, for matrix kernels, on
missing MFMA instructions or a loop (a backward branch) without one. Each kernel must match an
entry of BUDGETS, so a new kernel arrives with its budget written down.

A missing compiler skips with the reason; under CI (CI set) it fails instead.
"""

import fnmatch
import os
from dataclasses import dataclass

import pytest

import amd_toolchain as tc


@dataclass(frozen=True)
class Budget:
    pattern: str          # fnmatch pattern over the demangled name (without "void ")
    matrix: bool          # an MFMA kernel: its loops must hold MFMA instructions
    min_waves: int        # occupancy floor, waves per SIMD
    why: str


# The one table of per-kernel budgets. The first matching entry applies.
BUDGETS = (
    Budget("flashsplit::*combine_kernel<*", matrix=False, min_waves=4,
           why="The combine streams fp32 partials: each thread keeps up to 8 16-byte loads in "
               "flight (kCombineSplitsPerChunk), so waves in flight are its latency hiding. At 4 "
               "waves per SIMD a CU holds 1024 lanes x 128 B = 128 KiB of loads, ~39 MiB over an "
               "MI300X's 304 CUs, several times the ~5-11 MB that 5.3 TB/s needs at 1-2 us of "
               "loaded HBM latency. It compiles to 6 (77-78 VGPRs); below 4 (over 128 "
               "VGPRs) its registers would have doubled."),
    Budget("flashsplit::portable::portable_fwd_kernel<flashsplit::gfx9::Policy<*, true>, *",
           matrix=True, min_waves=1,
           why="The narrow decode tile (one wave, 16 rows): its workgroup keeps a whole 64-key "
               "block of K and V in flight in registers (32 KiB at d = 128) and takes 32 KiB of "
               "LDS, so LDS admits two per compute unit, fewer waves than one per SIMD; more "
               "waves per SIMD from registers would find no LDS to run with."),
    Budget("flashsplit::portable::portable_fwd_kernel<flashsplit::gfx9::Policy<*, false>, *",
           matrix=True, min_waves=2,
           why="Wide attention tiles of the gfx9 policy: two waves per SIMD (two workgroups of "
               "four waves per compute unit, 32 KiB of LDS each) let one wave's softmax (VALU, "
               "exp2) and LDS reads overlap the other's MFMAs, which the portable algorithm "
               "relies on instead of hand-scheduled ping-pong."),
)


def budget_for(demangled):
    name = demangled[len("void "):] if demangled.startswith("void ") else demangled
    for budget in BUDGETS:
        if fnmatch.fnmatchcase(name, budget.pattern):
            return budget
    return None


_ROWS_PRINTED = []


def _print_rows(rows):
    header = ("kernel", "target", "VGPR", "AGPR", "SGPR", "LDS B", "scratch", "spills",
              "waves/SIMD", "budget", "back-branches (MFMA)")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    widths[0] = max(widths[0], 60)
    lines = []
    if not _ROWS_PRINTED:
        lines.append("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows]
    _ROWS_PRINTED.extend(rows)
    return "\n".join(lines)


def _short(demangled):
    """flashsplit::(anonymous namespace)::combine_kernel<__hip_bfloat16, 64>(...) ->
    combine_kernel<__hip_bfloat16, 64>"""
    name = demangled[len("void "):] if demangled.startswith("void ") else demangled
    name = name.replace("flashsplit::(anonymous namespace)::", "").replace("flashsplit::", "")
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            return name[:i]
    return name


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("amd"))


@pytest.mark.parametrize("target", tc.TARGETS)
@pytest.mark.parametrize("source", tc.amd_sources(), ids=lambda s: tc.rel(s))
def test_amd_kernels_within_budget(source, target, out_dir, capsys):
    tc.require_compiler(target)
    if tc.readobj() is None:
        tc.missing_compiler_outcome("llvm-readobj not found (apt-get install llvm-19)")
    build = tc.compile_source(source, target, out_dir)
    kernels = tc.kernel_metadata(build.code_object)
    assert kernels, f"{tc.rel(source)} on {target}: the code object holds no kernel"
    waves = tc.occupancy(build.remarks)
    with open(build.assembly) as f:
        code = tc.read_assembly(f.read())
    names = tc.demangle([k["name"] for k in kernels])

    rows, problems = [], []
    for k in kernels:
        name, demangled = k["name"], names[k["name"]]
        budget = budget_for(demangled)
        asm = code.get(name, tc.FunctionCode())
        kernel_loops = asm.loops
        spills = k.get("vgpr_spill_count", 0) + k.get("sgpr_spill_count", 0)
        lds = k.get("group_segment_fixed_size", 0)
        scratch = k.get("private_segment_fixed_size", 0)
        occ = waves.get(name)
        rows.append((_short(demangled), target, k.get("vgpr_count"), k.get("agpr_count", 0),
                     k.get("sgpr_count"), lds, scratch, spills, occ,
                     f">={budget.min_waves}" if budget else "none",
                     f"{len(kernel_loops)} ({sum(loop.mfma > 0 for loop in kernel_loops)})"))
        where = f"{_short(demangled)} on {target} ({build.compiler})"
        if budget is None:
            problems.append(f"{where}: no entry in BUDGETS matches {demangled!r}")
            continue
        if k.get("wavefront_size") != 64:
            problems.append(f"{where}: wavefront size {k.get('wavefront_size')}, expected 64")
        if scratch:
            problems.append(f"{where}: {scratch} bytes of scratch per lane")
        if spills:
            problems.append(f"{where}: {spills} spilled registers")
        if lds > tc.LDS_BYTES[target]:
            problems.append(f"{where}: {lds} bytes of LDS, the target has {tc.LDS_BYTES[target]}")
        if occ is None:
            problems.append(f"{where}: the compiler reported no occupancy")
        elif occ < budget.min_waves:
            problems.append(f"{where}: {occ} waves per SIMD, budget {budget.min_waves} ({budget.why})")
        if budget.matrix:
            if asm.mfma == 0:
                problems.append(f"{where}: a matrix kernel without an MFMA instruction")
            for loop in (loop for loop in kernel_loops if loop.mfma == 0):
                problems.append(f"{where}: the loop at {loop.header} ({loop.instructions} "
                                "instructions) holds no MFMA instruction")
    with capsys.disabled():
        print("\n" + _print_rows(rows))
    assert not problems, "\n".join(problems)


def test_loop_reader_finds_loops_without_mfma():
    # The matrix-kernel rule reads loops from assembly; check the reader on text of the shape
    # clang prints (labels, branches with trailing comments, a nested loop, and an if whose far
    # side is placed after the code it rejoins: a backward branch that is no loop).
    asm = """
\t.type\tk,@function
k:
\ts_cbranch_scc0 .LBB0_5
.LBB0_4:
\ts_mov_b32 s0, 0
.LBB0_1:                                ; =>This Loop Header: Depth=1
\tv_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]
.LBB0_2:                                ;   Parent Loop BB0_1 Depth=1
\tv_add_f32_e32 v4, v4, v5
\ts_cbranch_scc1 .LBB0_2
\ts_cbranch_vccnz .LBB0_1 ; back to the outer header
\ts_branch .LBB0_3
.LBB0_5:
\ts_mov_b32 s0, 1
\ts_branch .LBB0_4
.LBB0_3:
\ts_endpgm
.Lfunc_end0:
"""
    loops = tc.read_assembly(asm)["k"].loops
    assert [(loop.header, loop.instructions, loop.mfma) for loop in loops] == [
        (".LBB0_2", 2, 0), (".LBB0_1", 4, 1)]


def test_every_kernel_name_pattern_is_reachable():
    # An entry shadowed by an earlier one would document a budget that never applies.
    for i, later in enumerate(BUDGETS):
        for earlier in BUDGETS[:i]:
            assert not fnmatch.fnmatchcase(later.pattern, earlier.pattern), (later, earlier)



@pytest.mark.parametrize("target", tc.TARGETS)
def test_gfx9_headers_compile_to_mfma(target, out_dir):
    # gfx9/mfma.h over mfma_layout.h, as device code on every target (the emulator test runs
    # the same probe on gfx942 and gfx950): one MFMA per kernel, nothing spilled.
    tc.require_compiler(target)
    probe = os.path.join(tc.REPO, "tests", "amd", "mfma_probe.hip")
    build = tc.compile_source(probe, target, out_dir, extra_flags=["-Wall", "-Wextra", "-Werror"])
    kernels = tc.kernel_metadata(build.code_object)
    with open(build.assembly) as f:
        code = tc.read_assembly(f.read())
    assert len(kernels) == (8 if target == "gfx950" else 4)
    for k in kernels:
        assert code[k["name"]].mfma == 1, k["name"]
        assert k.get("private_segment_fixed_size", 0) == 0 and k.get("vgpr_spill_count", 0) == 0


@pytest.mark.parametrize("target", tc.TARGETS)
def test_hip_shim_probe_compiles(target, out_dir):
    # Every part of hip_shim.h that platform.h exposes, as device code on every target (the
    # emulator test runs it on gfx942 and gfx950).
    tc.require_compiler(target)
    probe = os.path.join(tc.REPO, "tests", "amd", "shim_probe.hip")
    build = tc.compile_source(probe, target, out_dir, extra_flags=["-Wall", "-Wextra", "-Werror"])
    (kernel,) = tc.kernel_metadata(build.code_object)
    assert kernel.get("private_segment_fixed_size", 0) == 0
    assert kernel.get("group_segment_fixed_size") == 128 * 4  # the probe's __shared__ mirror
