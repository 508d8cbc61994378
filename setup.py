"""Builds flashsplit._C with torch.utils.cpp_extension.

GPU kernels are compiled when the installed torch is a CUDA build and nvcc is found; otherwise a
CPU-only module is built (the gate then reports "built without GPU kernels" and every call takes
the reference path). Install with `pip install --no-build-isolation .` so the build sees the torch
you already have, as flash-attn does.

Environment:
  TORCH_CUDA_ARCH_LIST  archs to compile for (default "8.0;9.0a")
  MAX_JOBS              parallel compile jobs (read by torch's BuildExtension)
  FLASHSPLIT_CPU_ONLY=1 skip the GPU kernels even where they could be built
"""
import glob
import os
import re

from setuptools import find_packages, setup

import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
HEAD_DIMS = (64, 128)  # must match the instantiations in csrc/kernels/sm80/
DEFAULT_ARCHS = "8.0;9.0a"


def rel(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern), recursive=True))


def refuse_rocm():
    if getattr(torch.version, "hip", None):
        raise SystemExit(
            "flashsplit: this torch is a ROCm build (HIP %s). flashsplit's HIP kernels are not "
            "written yet (csrc/kernels has no AMD target), so there is nothing to build for this "
            "GPU. Install a CUDA or CPU build of torch, or set FLASHSPLIT_CPU_ONLY=1 to build the "
            "CPU-only module (reference path only)." % torch.version.hip
        )


def want_gpu_kernels():
    if os.environ.get("FLASHSPLIT_CPU_ONLY") == "1":
        return False
    refuse_rocm()
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


def arch_numbers(arch_list):
    """'8.0;9.0a' -> [80, 90]: the compute capabilities the gate may admit."""
    archs = []
    for item in re.split(r"[;\s,]+", arch_list.strip()):
        match = re.match(r"^(\d+)\.(\d+)", item)
        if not match:
            raise SystemExit("flashsplit: cannot read TORCH_CUDA_ARCH_LIST entry %r" % item)
        archs.append(int(match.group(1)) * 10 + int(match.group(2)))
    return sorted(set(archs))


def extension():
    sources = rel("csrc/core/*.cpp") + rel("csrc/torch/*.cpp")
    include_dirs = [os.path.join(HERE, "csrc")]
    cxx_flags = ["-O3"]  # the C++ standard is torch's choice (its headers need it)
    if not want_gpu_kernels():
        return cpp_extension.CppExtension(
            "flashsplit._C", sources, include_dirs=include_dirs, extra_compile_args={"cxx": cxx_flags}
        )
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCHS)
    archs = arch_numbers(os.environ["TORCH_CUDA_ARCH_LIST"])
    defines = [
        "-DFLASHSPLIT_WITH_CUDA",
        "-DFLASHSPLIT_BUILT_ARCHS=" + ",".join(map(str, archs)),
        "-DFLASHSPLIT_HEAD_DIMS=" + ",".join(map(str, HEAD_DIMS)),
    ]
    # nvcc reads commas in -D values as list separators: the kernels need only the switch.
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo", "-DFLASHSPLIT_WITH_CUDA"]
    # The Hopper kernels need the arch-specific sm_90a target (wgmma, setmaxnreg).
    if re.search(r"(^|[;\s,])9\.0a", os.environ["TORCH_CUDA_ARCH_LIST"]):
        defines.append("-DFLASHSPLIT_WITH_HOPPER")
    if os.environ.get("FLASHSPLIT_PTXAS_VERBOSE") == "1":
        nvcc_flags.append("-Xptxas=-v")
    return cpp_extension.CUDAExtension(
        "flashsplit._C",
        sources + rel("csrc/kernels/**/*.cu"),
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags + defines, "nvcc": nvcc_flags},
    )


setup(
    name="flashsplit",
    version="0.1.0",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
