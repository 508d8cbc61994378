"""The Hopper kernels' machine code, checked without a GPU.

Each sm_90a translation unit is compiled as setup.py compiles it and disassembled; every kernel
must then have no spills and no stack frame, and must leave alone every register of a wgmma
still in flight. A wgmma reads its A fragment (P, for O += P V) and writes its accumulators
asynchronously, until the wait that covers its group; neither nvcc nor ptxas keeps other
values out of those registers meanwhile (they see the A fragment as read at issue), so a
kernel that computes the next block's P under the running P V can end up writing P's own
registers, and the P V reads a mix of two blocks. Nothing else catches this short of running
the kernel: the scan below reads the SASS in program order, tracks the registers of each
committed HGMMA group until a WARPGROUP.DEPBAR covers it, and reports any instruction that
writes such an A register or touches such an accumulator.

Needs nvcc (CUDA 12.5 or later, for sm_90a), cuobjdump and nvdisasm (on PATH, or from the PyPI
wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm); skips, saying which, when one is missing.
"""

import glob
import os
import re

import pytest

from cuda_sass import REPO, compile_unit, kernels, tools_or_skip

UNITS = sorted(glob.glob(os.path.join(REPO, "csrc", "kernels", "sm90", "fwd_*.cu")))


def register(operand):
    match = re.match(r"-?\|?R(\d+)", operand)
    return int(match.group(1)) if match else None


def wgmma_hazards(instructions):
    """Instructions that write an A-fragment register, or touch an accumulator, of an HGMMA
    group not yet covered by a WARPGROUP.DEPBAR (program order)."""
    in_flight = []  # committed groups, oldest first: (A registers, accumulator registers)
    a_regs, d_regs = set(), set()
    found = []
    for address, text in instructions:
        plain = re.sub(r"^@!?U?P\w+\s+", "", text)
        op = plain.split()[0]
        if op.startswith("HGMMA"):
            operands = [x.strip() for x in plain[len(op):].split(",")]
            n = int(re.search(r"64x(\d+)x", op).group(1))
            d_regs |= set(range(register(operands[0]), register(operands[0]) + n // 2))
            if register(operands[1]) is not None:  # A from registers: 4 per thread
                a_regs |= set(range(register(operands[1]), register(operands[1]) + 4))
            if "gsb0" in plain:  # the group's last wgmma
                in_flight.append((a_regs, d_regs))
                a_regs, d_regs = set(), set()
            continue
        wait = re.match(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([0-9a-f]+)", plain)
        if wait:
            pending = int(wait.group(1), 16)
            in_flight = in_flight[len(in_flight) - pending:] if pending else []
            continue
        if op.startswith("WARPGROUP") or not in_flight:
            continue
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", plain)]
        if not regs:
            continue
        no_destination = op.startswith(("ST", "RED", "ATOM", "SYNCS", "BAR", "BRA", "ISETP",
                                        "FSETP", "VOTE"))
        width = 4 if ".128" in op else 2 if ".64" in op else 1
        written = set() if no_destination else set(range(regs[0], regs[0] + width))
        read = set(regs if no_destination else regs[1:])
        pending_a = set().union(*(g[0] for g in in_flight))
        pending_d = set().union(*(g[1] for g in in_flight))
        if written & pending_a:
            found.append(f"{address} {text}: writes the A fragment of a wgmma in flight")
        if (written | read) & pending_d:
            found.append(f"{address} {text}: touches the accumulator of a wgmma in flight")
    return found


def test_the_scan_finds_a_write_to_p_under_its_p_v():
    """The scan on hand-written SASS: P (R152..) rewritten before the wait, then after it."""
    sass = [("0100", "HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR24].tnspB, R24, gsb0"),
            ("0110", "FFMA R153, R90, R7, -R20"),
            ("0120", "FMUL R30, R2, R3"),
            ("0130", "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
            ("0140", "F2FP.BF16.F32.PACK_AB R152, R89, R88")]
    found = wgmma_hazards(sass)
    assert len(found) == 2 and "0110" in found[0] and "0120" in found[1], found


@pytest.mark.parametrize("unit", UNITS, ids=[os.path.basename(u) for u in UNITS])
def test_hopper_kernels_keep_wgmma_registers_and_do_not_spill(unit, tmp_path):
    nvcc, dump = tools_or_skip()
    ptxas_report, sass = compile_unit(nvcc, dump, unit, str(tmp_path))
    found = kernels(sass)
    assert found, "no kernel in " + unit
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                        r"loads", ptxas_report)
    assert len(frames) >= len(found), ptxas_report[-2000:]
    assert all(f == ("0", "0", "0") for f in frames), ptxas_report[-2000:]
    hazards = {name: wgmma_hazards(instructions) for name, instructions in found.items()}
    hazards = {name: h for name, h in hazards.items() if h}
    assert not hazards, "\n".join(f"{name}: {h[:3]}" for name, h in hazards.items())
