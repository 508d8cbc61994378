"""Runs flashsplit's AMD kernels on a CPU emulator of the CDNA ISA (gfx942, gfx950).

The emulator (tinygrad's CDNA emulator behind a launch harness, emu_run.py) lives outside the
repository and runs in its own Python, so a launch is described here, run in a child process
of that Python (this file's `child_main`), and its buffers come back:

    params = attn_params({"b": 1, "h": 3, ...}, {"out": "out", ...})   # AttnFwdParams
    launch = Launch(code_object, kernel_symbol, grid=(gx, 1, 1), block=(128, 1, 1),
                    args=[params, Value((3).to_bytes(4, "little")), Buffer("lse")],
                    buffers={"out": np.full(n, 0xFFFF, np.uint16), "lse": ...})
    results = run_launches([launch, ...])       # buffers updated in place, stats returned

Any kernel plugs in: symbol, grid, block, dynamic LDS, a subset of workgroups, the wave order
inside a workgroup ("fwd", "rev", "random") and poisoned registers and LDS (0xFFFFFFFF). Every
buffer is surrounded by canary bytes in the child, and a launch that writes outside its buffers
fails, also for pointers passed inside a by-value struct.

Kernels that take AttnFwdParams by value get it from `attn_params()`, which packs the struct
with field offsets read from the real header (a small host program compiled with g++ prints
offsetof and sizeof of every field), so a changed layout is noticed, not mis-packed.

Environment:
  FLASHSPLIT_AMD_EMU          folder of the emulator harness (emu_run.py); unset = no emulator
  FLASHSPLIT_AMD_EMU_PYTHON   the Python that imports it (default $EMU_HOME/venv/bin/python)
  EMU_HOME                    the emulator's own home (default /tmp/emu), passed through
"""

import functools
import json
import os
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(REPO, "csrc")

# Targets the emulator executes (it rejects gfx90a code objects).
EMU_TARGETS = ("gfx942", "gfx950")


def find_emulator():
    """(python, emu_dir, None) when FLASHSPLIT_AMD_EMU names a usable emulator, else
    (None, None, why not)."""
    emu_dir = os.environ.get("FLASHSPLIT_AMD_EMU")
    if not emu_dir:
        return None, None, ("FLASHSPLIT_AMD_EMU is not set (the folder of the CDNA emulator "
                            "harness, emu_run.py)")
    if not os.path.isfile(os.path.join(emu_dir, "emu_run.py")):
        return None, None, f"FLASHSPLIT_AMD_EMU={emu_dir} holds no emu_run.py"
    home = os.environ.get("EMU_HOME", "/tmp/emu")
    python = os.environ.get("FLASHSPLIT_AMD_EMU_PYTHON", os.path.join(home, "venv", "bin", "python"))
    if not os.access(python, os.X_OK):
        return None, None, (f"no emulator Python at {python} (set FLASHSPLIT_AMD_EMU_PYTHON or "
                            "EMU_HOME)")
    return python, emu_dir, None


# ---- AttnFwdParams, packed from the real header --------------------------------------------------

# Every field of AttnFwdParams in declaration order, with how it is packed. The layout helper
# checks this list against the header: offsets and sizes from offsetof/sizeof, and that the
# fields in this order tile the struct (so a field added, removed or moved is reported).
PARAM_FIELDS = (
    ("elem", "i32"),
    ("q", "ptr"), ("k", "ptr"), ("v", "ptr"), ("out", "ptr"), ("lse", "ptr"),
    ("q_batch_stride", "i64"), ("q_row_stride", "i64"), ("q_head_stride", "i64"),
    ("k_batch_stride", "i64"), ("k_row_stride", "i64"), ("k_head_stride", "i64"),
    ("v_batch_stride", "i64"), ("v_row_stride", "i64"), ("v_head_stride", "i64"),
    ("o_batch_stride", "i64"), ("o_row_stride", "i64"), ("o_head_stride", "i64"),
    ("b", "i32"), ("sq", "i32"), ("sk", "i32"), ("h", "i32"), ("hk", "i32"), ("d", "i32"),
    ("dv", "i32"), ("seqs", "i32"), ("max_seqlen_q", "i32"), ("kv_batches", "i32"),
    ("cu_seqlens_q", "ptr"), ("cu_seqlens_k", "ptr"), ("seqused_k", "ptr"),
    ("kv_batch_idx", "ptr"), ("block_table", "ptr"), ("block_table_stride", "i64"),
    ("page_size", "i32"),
    ("softmax_scale", "f32"), ("causal", "bool"),
    ("num_splits", "i32"), ("o_accum", "ptr"), ("lse_accum", "ptr"),
    ("tail_ws", "ptr"), ("tail_ws_bytes", "u64"),
    ("tile_counter", "ptr"),
)
_KIND = {"i32": ("<i", 4), "i64": ("<q", 8), "u64": ("<Q", 8), "f32": ("<f", 4), "bool": ("<B", 1),
         "ptr": ("<Q", 8)}
# Enumerators the kernels read, by qualified name.
PARAM_ENUMS = ("ElemType::kFloat16", "ElemType::kBFloat16")


class LayoutError(RuntimeError):
    pass



def require_emulator():
    """Returns when FLASHSPLIT_AMD_EMU names a usable emulator; otherwise the calling test
    skips, saying why."""
    python, _, why = find_emulator()
    if python is None:
        import pytest
        pytest.skip(why)


def report(capsys, lines, failures):
    """Prints a test's table past pytest's capture (the runs are the proof), then fails on any
    failure, listing them."""
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not failures, "\n".join(failures)

def _host_program(lanes_queries):
    lines = ['#include <cstddef>', '#include <cstdio>', '#include "kernels/attn_params.h"',
             '#include "core/combine_math.h"', 'int main() {',
             '  using P = flashsplit::AttnFwdParams;',
             '  std::printf("{\\"sizeof\\": %zu, \\"alignof\\": %zu, \\"fields\\": {", sizeof(P), alignof(P));']
    for i, (name, _) in enumerate(PARAM_FIELDS):
        sep = "," if i else ""
        lines.append(f'  std::printf("{sep}\\"{name}\\": [%zu, %zu]", offsetof(P, {name}), sizeof(P::{name}));')
    lines.append('  std::printf("}, \\"enums\\": {");')
    for i, enum in enumerate(PARAM_ENUMS):
        sep = "," if i else ""
        lines.append(f'  std::printf("{sep}\\"{enum}\\": %d", static_cast<int>(flashsplit::{enum}));')
    lines.append('  std::printf("}, \\"combine_lanes\\": {");')
    for i, (splits, d) in enumerate(lanes_queries):
        sep = "," if i else ""
        lines.append(f'  std::printf("{sep}\\"{splits},{d}\\": %d", flashsplit::combine_lanes({splits}));')
    lines += ['  std::printf("}}\\n");', '  return 0;', '}']
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=None)
def host_facts():
    """AttnFwdParams' layout, its enumerators and combine_lanes(G, d) for G < 257, d in {64,
    128}, as the host compiler sees the headers."""
    queries = [(g, d) for d in (64, 128) for g in range(1, 257)]
    work = tempfile.mkdtemp(prefix="flashsplit-layout-")
    src, exe = os.path.join(work, "layout.cpp"), os.path.join(work, "layout")
    with open(src, "w") as f:
        f.write(_host_program(queries))
    cxx = os.environ.get("CXX", "g++")
    build = subprocess.run([cxx, "-std=c++17", "-O0", f"-I{CSRC}", src, "-o", exe],
                           capture_output=True, text=True)
    if build.returncode != 0:
        raise LayoutError("the AttnFwdParams layout program does not compile against the header "
                          f"(a field in PARAM_FIELDS is gone or renamed?):\n{build.stderr}")
    facts = json.loads(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)
    _check_layout(facts)
    facts["combine_lanes"] = {tuple(map(int, k.split(","))): v for k, v in facts["combine_lanes"].items()}
    return facts


def _check_layout(facts):
    offset = 0
    for name, kind in PARAM_FIELDS:
        size = _KIND[kind][1]
        offset = (offset + size - 1) // size * size  # every field here aligns to its size
        got_offset, got_size = facts["fields"][name]
        if (got_offset, got_size) != (offset, size):
            raise LayoutError(f"AttnFwdParams.{name}: header has offset {got_offset} size "
                              f"{got_size}, PARAM_FIELDS implies {offset} size {size}; a field was "
                              "added, moved or retyped: update PARAM_FIELDS")
        offset += size
    end = (offset + facts["alignof"] - 1) // facts["alignof"] * facts["alignof"]
    if end != facts["sizeof"]:
        raise LayoutError(f"sizeof(AttnFwdParams) is {facts['sizeof']}, the fields of PARAM_FIELDS "
                          f"end at {end}: a field was added at the end; update PARAM_FIELDS")


@dataclass
class StructArg:
    """A by-value struct argument: its bytes, and which offsets hold pointers to which buffers
    (filled in by the child once the buffers have addresses)."""
    data: bytes
    pointers: dict = field(default_factory=dict)   # offset -> buffer name


@dataclass
class Value:
    data: bytes


@dataclass
class Buffer:
    name: str


def attn_params(values, pointers):
    """AttnFwdParams as the torch layer fills it for a launch: `values` sets scalar fields (enum
    fields take their enumerator's name, e.g. "ElemType::kBFloat16"), `pointers` maps pointer
    fields to buffer names. Every other byte is zero, so name each field the kernel reads."""
    facts = host_facts()
    data = bytearray(facts["sizeof"])
    kinds = dict(PARAM_FIELDS)
    for name, value in values.items():
        fmt, _ = _KIND[kinds[name]]
        if isinstance(value, str):
            value = facts["enums"][value]
        struct.pack_into(fmt, data, facts["fields"][name][0], value)
    ptrs = {}
    for name, buffer in pointers.items():
        if kinds[name] != "ptr":
            raise LayoutError(f"AttnFwdParams.{name} is not a pointer")
        ptrs[facts["fields"][name][0]] = buffer
    return StructArg(bytes(data), ptrs)


# ---- launches -----------------------------------------------------------------------------------------

@dataclass
class Launch:
    code_object: str
    kernel: str                       # symbol, as in the code object's metadata
    grid: tuple
    block: tuple
    args: list                        # StructArg | Value | Buffer, in the kernel's order
    buffers: dict                     # name -> numpy array (C-contiguous), updated in place
    dynamic_lds: int = 0
    workgroups: list = None           # [(x, y, z), ...] to run only those; None = all
    order: str = "fwd"                # wave order inside a workgroup: fwd | rev | random
    poison: bool = True               # registers and LDS start as 0xFFFFFFFF
    denorm: str = "ieee"              # f32 denormals kept, HIP's default mode
    label: str = ""


@dataclass
class Result:
    ok: bool
    error: str = ""
    wave_insts: int = 0
    workgroups: int = 0
    wall_s: float = 0.0


def run_launches(launches, timeout=1800):
    """Runs the launches: one child process per code object, those in parallel. Buffers are
    updated in place; one Result per launch, in order."""
    python, emu_dir, why = find_emulator()
    if python is None:
        raise RuntimeError(why)
    groups = {}
    for i, launch in enumerate(launches):
        groups.setdefault(launch.code_object, []).append(i)
    results = [None] * len(launches)

    def run_group(indices):
        import numpy as np
        work = tempfile.mkdtemp(prefix="flashsplit-emu-")
        job = {"emu_dir": emu_dir, "launches": []}
        for i in indices:
            launch = launches[i]
            npz = os.path.join(work, f"launch{i}.npz")
            np.savez(npz, **launch.buffers)
            args = []
            for arg in launch.args:
                if isinstance(arg, StructArg):
                    args.append({"kind": "struct", "hex": arg.data.hex(),
                                 "pointers": {str(k): v for k, v in arg.pointers.items()}})
                elif isinstance(arg, Value):
                    args.append({"kind": "value", "hex": arg.data.hex()})
                elif isinstance(arg, Buffer):
                    args.append({"kind": "buffer", "name": arg.name})
                else:
                    raise TypeError(f"launch argument {arg!r}")
            job["launches"].append({
                "code_object": launch.code_object, "kernel": launch.kernel,
                "grid": list(launch.grid), "block": list(launch.block), "args": args,
                "dynamic_lds": launch.dynamic_lds, "workgroups": launch.workgroups,
                "order": launch.order, "poison": launch.poison, "denorm": launch.denorm,
                "npz": npz, "out": os.path.join(work, f"launch{i}.out.npz")})
        spec = os.path.join(work, "job.json")
        with open(spec, "w") as f:
            json.dump(job, f)
        proc = subprocess.run([python, os.path.abspath(__file__), spec], capture_output=True,
                              text=True, timeout=timeout)
        report = os.path.join(work, "job.result.json")
        if not os.path.exists(report):
            for i in indices:
                results[i] = Result(False, f"emulator process failed (exit {proc.returncode}):\n"
                                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            return
        with open(report) as f:
            reported = json.load(f)
        for i, r in zip(indices, reported):
            results[i] = Result(**r)
            if r["ok"]:
                with np.load(job["launches"][indices.index(i)]["out"]) as out:
                    for name, array in launches[i].buffers.items():
                        array[...] = out[name]

    with ThreadPoolExecutor(max_workers=max(1, min(len(groups), os.cpu_count() or 1))) as pool:
        list(pool.map(run_group, groups.values()))
    return results


# ---- the child: runs inside the emulator's Python --------------------------------------------------

_GUARD = 4096
_CANARY = 0xA5


def _guarded(array, np):
    """A copy of `array` inside canary bytes, 256-byte aligned; returns (raw, view, offset)."""
    raw = np.full(array.nbytes + 2 * _GUARD + 256, _CANARY, np.uint8)
    offset = _GUARD + (-(raw.ctypes.data + _GUARD) % 256)
    raw[offset:offset + array.nbytes] = array.reshape(-1).view(np.uint8)
    return raw, offset


def child_main(spec_path):
    import time
    import numpy as np
    with open(spec_path) as f:
        job = json.load(f)
    sys.path.insert(0, job["emu_dir"])
    from emu_run import CodeObject  # noqa: E402 (the emulator's own harness)
    objects, results = {}, []
    for launch in job["launches"]:
        try:
            co = objects.get(launch["code_object"]) or CodeObject(launch["code_object"])
            objects[launch["code_object"]] = co
            kernel = co.kernel(launch["kernel"])
            with np.load(launch["npz"]) as data:
                buffers = {name: data[name].copy() for name in data.files}
            guarded = {name: _guarded(array, np) for name, array in buffers.items()}
            address = {name: raw.ctypes.data + offset for name, (raw, offset) in guarded.items()}
            args = []
            for arg in launch["args"]:
                if arg["kind"] == "buffer":
                    args.append(address[arg["name"]])
                elif arg["kind"] == "value":
                    args.append(bytes.fromhex(arg["hex"]))
                else:
                    data = bytearray.fromhex(arg["hex"])
                    for off, name in arg["pointers"].items():
                        struct.pack_into("<Q", data, int(off), address[name])
                    args.append(bytes(data))
            workgroups = [tuple(w) for w in launch["workgroups"]] if launch["workgroups"] else None
            start = time.perf_counter()
            stats = kernel.launch(grid=tuple(launch["grid"]), block=tuple(launch["block"]), args=args,
                                  dynamic_lds=launch["dynamic_lds"], workgroups=workgroups,
                                  order=launch["order"], poison=launch["poison"],
                                  denorm=launch["denorm"], guard=0)
            wall = time.perf_counter() - start
            overwritten = []
            for name, (raw, offset) in guarded.items():
                size = buffers[name].nbytes
                outside = np.concatenate([raw[:offset], raw[offset + size:]])
                if np.any(outside != _CANARY):
                    overwritten.append(name)
                buffers[name].reshape(-1).view(np.uint8)[:] = raw[offset:offset + size]
            np.savez(launch["out"], **buffers)
            if overwritten:
                results.append({"ok": False, "error": f"writes outside buffers {overwritten}"})
            else:
                results.append({"ok": True, "wave_insts": stats.insts, "workgroups": stats.workgroups,
                                "wall_s": wall})
        except Exception as e:  # report, and go on with the next launch
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(os.path.splitext(spec_path)[0] + ".result.json", "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    child_main(sys.argv[1])
