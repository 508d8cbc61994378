"""Compiling flashsplit's AMD (gfx9) device code without ROCm, and reading what came out.

One place for the compiler discovery, the flags and the readers, shared by the compile and
resource check (test_amd_compile.py) and the emulator test (test_amd_emulator.py).

Compilers (each target takes the first that can build it):
  gfx90a, gfx942  FLASHSPLIT_AMD_CLANG, then clang-19 ... clang-22, clang on PATH
  gfx950          FLASHSPLIT_GFX950_CLANG, then clang-22 ... clang-20, clang on PATH (gfx950
                  arrived in clang 20), then zig's clang (PyPI ziglang, clang 22): the ziglang
                  package of this interpreter, or the zig binary FLASHSPLIT_ZIG names.
Every candidate is probed once by compiling an empty kernel for the target.

Flags: `-x hip --offload-arch=T --offload-device-only --no-gpu-bundle-output -nogpuinc
-nogpulib -O3 -std=c++17 -DFLASHSPLIT_HIP_SHIM -Icsrc`: device code only, against the
project's hip_shim.h (platform.h) instead of ROCm's headers, linked into a code object by lld.

zig's clang links the device object by running `lld -flavor gnu ...` from PATH; a small wrapper
(written to a temporary folder) drops `-flavor gnu` and runs `zig ld.lld`. zig's clang also needs
its own resource folder for clang's builtin headers and the host triple of this machine (the
host side of a HIP compile parses the launchers against the system's C++ headers).

Readers: the kernels' metadata (NT_AMDGPU_METADATA note, printed by llvm-readobj --notes),
occupancy from the compiler's kernel-resource-usage remarks, and the loops of each kernel from
its assembly.
"""

import atexit
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(REPO, "csrc")

# What the checks cover: the AMD translation units and targets.
TARGETS = ("gfx90a", "gfx942", "gfx950")
# LDS per workgroup: 64 KiB on CDNA2 (MI250X) and CDNA3 (MI300X), 160 KiB on CDNA4 (MI355X).
LDS_BYTES = {"gfx90a": 64 * 1024, "gfx942": 64 * 1024, "gfx950": 160 * 1024}


def amd_sources():
    """Every AMD translation unit: the shared combine, and each gfx9 policy instantiation."""
    shared = [os.path.join(CSRC, "kernels", "combine_kernel.cu")]
    return shared + sorted(glob.glob(os.path.join(CSRC, "kernels", "gfx9", "*.cu")))


def rel(path):
    return os.path.relpath(path, REPO)


DEVICE_FLAGS = ["-x", "hip", "--offload-device-only", "--no-gpu-bundle-output", "-nogpuinc",
                "-nogpulib", "-O3", "-std=c++17", "-DFLASHSPLIT_HIP_SHIM"]


@dataclass
class Compiler:
    """A clang that can build device code for one target."""
    name: str                     # how reports name it, e.g. "clang-19" or "zig 0.17.1 clang"
    argv: list                    # the command up to the flags (e.g. [zig, "clang", ...])
    env: dict = field(default_factory=dict)  # what it needs in its environment

    def run(self, args, **kwargs):
        env = dict(os.environ)
        env.update(self.env)
        return subprocess.run(self.argv + args, env=env, capture_output=True, text=True, **kwargs)


_TEMP = None


def _temp_dir():
    global _TEMP
    if _TEMP is None:
        _TEMP = tempfile.mkdtemp(prefix="flashsplit-amd-")
        atexit.register(shutil.rmtree, _TEMP, True)
    return _TEMP


def _zig_binary():
    named = os.environ.get("FLASHSPLIT_ZIG")
    if named:
        return named if os.access(named, os.X_OK) else None
    try:
        import ziglang  # PyPI ziglang: the zig binary ships inside the package
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(ziglang.__file__), "zig")
    return path if os.access(path, os.X_OK) else None


def _zig_compiler(zig):
    """zig's clang, with the lld wrapper first on PATH and zig's builtin headers."""
    bin_dir = os.path.join(_temp_dir(), "zig-bin")
    lld = os.path.join(bin_dir, "lld")
    if not os.path.exists(lld):
        os.makedirs(bin_dir, exist_ok=True)
        with open(lld, "w") as f:
            f.write('#!/bin/sh\n'
                    '# zig clang links device code with `lld -flavor gnu ARGS`; zig ld.lld is that lld.\n'
                    'if [ "$1" = "-flavor" ]; then shift 2; fi\n'
                    'exec "$FLASHSPLIT_ZIG_FOR_LLD" ld.lld "$@"\n')
        os.chmod(lld, 0o755)
    version = subprocess.run([zig, "version"], capture_output=True, text=True).stdout.strip()
    resource = os.path.join(os.path.dirname(zig), "lib")
    host = "x86_64-unknown-linux-gnu"
    try:
        host = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True,
                              check=True).stdout.strip() or host
    except (OSError, subprocess.CalledProcessError):
        pass
    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "FLASHSPLIT_ZIG_FOR_LLD": zig}
    return Compiler(name=f"zig {version} clang", argv=[zig, "clang", f"--target={host}",
                                                       "-resource-dir", resource], env=env)


def _clang_candidates(target):
    named = os.environ.get("FLASHSPLIT_GFX950_CLANG" if target == "gfx950" else "FLASHSPLIT_AMD_CLANG")
    if named:
        return [Compiler(name=os.path.basename(named), argv=[named])]
    versions = range(22, 19, -1) if target == "gfx950" else range(19, 23)
    names = [f"clang-{v}" for v in versions] + ["clang"]
    found = [Compiler(name=n, argv=[shutil.which(n)]) for n in names if shutil.which(n)]
    if target == "gfx950":
        zig = _zig_binary()
        if zig:
            found.append(_zig_compiler(zig))
    return found


_PROBE = '__attribute__((global)) void flashsplit_probe(int* p) { *p = 1; }\n'


def _builds_for(compiler, target):
    src = os.path.join(_temp_dir(), "probe.hip")
    if not os.path.exists(src):
        with open(src, "w") as f:
            f.write(_PROBE)
    out = os.path.join(_temp_dir(), f"probe-{target}.co")
    try:
        result = compiler.run(DEVICE_FLAGS + [f"--offload-arch={target}", src, "-o", out], timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and os.path.exists(out)


@functools.lru_cache(maxsize=None)
def find_compiler(target):
    """(Compiler, None) for the first candidate that builds `target`, else (None, why not)."""
    candidates = _clang_candidates(target)
    for compiler in candidates:
        if _builds_for(compiler, target):
            return compiler, None
    tried = ", ".join(c.name for c in candidates) or "none found"
    if target == "gfx950":
        need = ("a clang >= 20 or zig's clang (pip install ziglang==0.17.1; "
                "or set FLASHSPLIT_GFX950_CLANG / FLASHSPLIT_ZIG)")
    else:
        need = "clang-19 (apt-get install clang-19 lld-19 llvm-19; or set FLASHSPLIT_AMD_CLANG)"
    return None, f"no compiler builds {target} (tried: {tried}); needs {need}"


def find_tool(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def readobj():
    return find_tool("llvm-readobj-19", "llvm-readobj-20", "llvm-readobj-21", "llvm-readobj-22",
                     "llvm-readobj")


@dataclass
class Build:
    """One translation unit compiled for one target."""
    source: str
    target: str
    compiler: str
    code_object: str              # the linked device code object (ELF)
    assembly: str                 # the same compile's assembly text
    remarks: str                  # the compiler's kernel-resource-usage remarks


class CompileError(RuntimeError):
    pass


def compile_source(source, target, out_dir, extra_flags=()):
    """Compiles one translation unit for one target: a code object and its assembly."""
    compiler, why = find_compiler(target)
    if compiler is None:
        raise CompileError(why)
    stem = os.path.splitext(os.path.basename(source))[0]
    code_object = os.path.join(out_dir, f"{stem}-{target}.co")
    assembly = os.path.join(out_dir, f"{stem}-{target}.s")
    flags = DEVICE_FLAGS + [f"--offload-arch={target}", f"-I{CSRC}"] + list(extra_flags)
    obj = compiler.run(flags + ["-Rpass-analysis=kernel-resource-usage", source, "-o", code_object])
    if obj.returncode != 0:
        raise CompileError(f"{compiler.name} failed for {rel(source)} on {target}:\n{obj.stderr}")
    asm = compiler.run(flags + ["-S", source, "-o", assembly])
    if asm.returncode != 0:
        raise CompileError(f"{compiler.name} -S failed for {rel(source)} on {target}:\n{asm.stderr}")
    return Build(source, target, compiler.name, code_object, assembly, obj.stderr)


# ---- readers -------------------------------------------------------------------------------------

def _scalar(value):
    value = value.strip().strip("'")
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def kernel_metadata(code_object):
    """Per kernel, the fields of its NT_AMDGPU_METADATA note (ints where numeric; name, symbol,
    vgpr_count, agpr_count, sgpr_count, *_spill_count, private_segment_fixed_size,
    group_segment_fixed_size, max_flat_workgroup_size, ...) and its "args" (offset, size,
    value_kind of each), as llvm-readobj --notes prints them: each kernel an item of
    `amdhsa.kernels` at indent 2, its fields at indent 4, its arguments at indent 6 and 8."""
    tool = readobj()
    if tool is None:
        raise CompileError("llvm-readobj not found (apt-get install llvm-19)")
    text = subprocess.run([tool, "--notes", code_object], capture_output=True, text=True,
                          check=True).stdout
    kernels, kernel, arg = [], None, None
    for line in text.splitlines():
        m = re.match(r"^( *)(- )?(\.\w+):\s*(.*)$", line)
        if not m:
            if line and not line.startswith(" "):
                kernel = arg = None  # the next top-level key ends the kernel list
            continue
        indent, item, key, value = len(m.group(1)), m.group(2), m.group(3)[1:], m.group(4)
        if indent == 2 and item:
            kernel, arg = {"args": []}, None
            kernels.append(kernel)
        if kernel is None:
            continue
        if indent == 6 and item:
            arg = {}
            kernel["args"].append(arg)
        if indent <= 4 and key != "args":
            kernel[key] = _scalar(value)
        elif indent >= 6 and arg is not None:
            arg[key] = _scalar(value)
    return [k for k in kernels if "name" in k]


def occupancy(remarks):
    """{kernel symbol: waves per SIMD} from -Rpass-analysis=kernel-resource-usage remarks."""
    result, name = {}, None
    for line in remarks.splitlines():
        m = re.search(r"remark: Function Name: (\S+)", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"remark:\s+Occupancy \[waves/SIMD\]: (\d+)", line)
        if m and name:
            result[name] = int(m.group(1))
    return result


@dataclass
class Loop:
    header: str                   # the label the backward branch jumps to
    instructions: int             # instructions between the label and the branch
    mfma: int                     # MFMA instructions among them


@dataclass
class FunctionCode:
    instructions: int = 0
    mfma: int = 0
    loops: list = field(default_factory=list)


def read_assembly(assembly_text):
    """{function symbol: FunctionCode}: its instruction and MFMA counts, and its loops. Each
    backward branch to a block clang marks as part of a loop (its label's comment: "Loop Header",
    "in Loop", "Parent Loop") is a loop whose body is the text from that label down to the
    branch (nested loops included); clang lays a loop's blocks out together, so that text is the
    loop. A backward branch to an unmarked block is block layout (an if's far side placed after
    the code it rejoins), no loop."""
    functions = set(re.findall(r"^\s*\.type\s+([\w.$]+),@function", assembly_text, re.M))
    code, body, name = {}, [], None
    for line in assembly_text.splitlines():
        start = re.match(r"^([\w.$]+):", line)
        if start and start.group(1) in functions:
            name, body = start.group(1), []
            code[name] = FunctionCode()
            continue
        if name is None:
            continue
        if re.match(r"^\.Lfunc_end\d+:", line):
            name = None
            continue
        label = re.match(r"^(\.L\w+):", line)
        if label:
            body.append(("loop" if "Loop" in line else "label", label.group(1)))
            continue
        inst = line.split(";", 1)[0].strip()
        if not inst or inst.startswith("."):
            continue
        body.append(("inst", inst))
        code[name].instructions += 1
        code[name].mfma += inst.startswith("v_mfma")
        branch = re.match(r"^s_(?:c)?branch\w*\s+(\.L\w+)", inst)
        if branch:
            for i in range(len(body) - 1, -1, -1):
                if body[i][0] != "inst" and body[i][1] == branch.group(1):
                    if body[i][0] == "loop":
                        insts = [c for kind, c in body[i:] if kind == "inst"]
                        code[name].loops.append(Loop(branch.group(1), len(insts),
                                                     sum(c.startswith("v_mfma") for c in insts)))
                    break
    return code


def demangle(names):
    tool = find_tool("llvm-cxxfilt-19", "llvm-cxxfilt", "c++filt")
    if tool is None:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def missing_compiler_outcome(reason):
    """A missing compiler skips the test, except under CI, where every target must be built."""
    import pytest
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: a missing AMD compiler fails the run)")
    pytest.skip(reason)


def require_compiler(target):
    """The compiler for target; without one, missing_compiler_outcome."""
    compiler, why = find_compiler(target)
    if compiler is None:
        missing_compiler_outcome(why)
    return compiler


if __name__ == "__main__":
    for t in TARGETS:
        c, why = find_compiler(t)
        print(t, c.name if c else why, file=sys.stdout)
