"""Compiling the CUDA translation units as setup.py does and reading their machine code, for the
tests that check it without a GPU (test_sm90_sass.py, test_portable_sass.py)."""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SM90A_FLAGS = ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DFLASHSPLIT_WITH_CUDA",
               "-DFLASHSPLIT_WITH_HOPPER", "-gencode=arch=compute_90a,code=sm_90a", "-cubin",
               "-Xptxas=-v"]


def cuda_tool(name):
    """A CUDA binary tool: on PATH, or from its PyPI wheel (nvidia/cu*/bin)."""
    found = shutil.which(name)
    if found:
        return found
    for root in sys.path:
        for candidate in glob.glob(os.path.join(root, "nvidia", "cu*", "bin", name)):
            return candidate
    return None


def tools_or_skip():
    nvcc, dump, disasm = shutil.which("nvcc"), cuda_tool("cuobjdump"), cuda_tool("nvdisasm")
    if nvcc is None:
        pytest.skip("nvcc not found: the sm_90a kernels cannot be compiled here")
    if dump is None or disasm is None:
        pytest.skip("cuobjdump or nvdisasm not found "
                    "(pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    os.environ.setdefault("NVDISASM_PATH", os.path.dirname(disasm))  # cuobjdump runs nvdisasm
    return nvcc, dump


def compile_unit(nvcc, dump, unit, folder):
    cubin = os.path.join(folder, os.path.basename(unit) + ".cubin")
    built = subprocess.run([nvcc, *SM90A_FLAGS, "-I", os.path.join(REPO, "csrc"), "-o", cubin,
                            unit], capture_output=True, text=True)
    if built.returncode != 0 and "sm_90a" in built.stderr and "not defined" in built.stderr:
        pytest.skip(f"this nvcc cannot build sm_90a: {built.stderr.strip()[:200]}")
    assert built.returncode == 0, built.stderr[-2000:]
    sass = subprocess.run([dump, "-sass", cubin], capture_output=True, text=True, check=True)
    return built.stderr, sass.stdout


def kernels(sass):
    """{mangled name: [(address, instruction)]} from cuobjdump -sass."""
    found, name = {}, None
    for line in sass.splitlines():
        header = re.match(r"\s+Function : (\S+)", line)
        if header:
            name = header.group(1)
            found[name] = []
            continue
        instruction = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if instruction and name:
            found[name].append((instruction.group(1), instruction.group(2).strip()))
    return found
