"""Builds flashsplit._C with torch.utils.cpp_extension.

GPU kernels are compiled when the installed torch is a CUDA build and a usable CUDA toolkit is
found: its nvcc, its headers (cuda_runtime_api.h, and the CUDA libraries' headers that torch's
own CUDA headers include, from the toolkit or from the nvidia-* wheels torch came with) and the
same CUDA major version as torch's.
Otherwise a CPU-only module is built (the gate then reports "built without GPU kernels" and
every call takes the reference path), and the build prints why and what to install for the GPU
kernels (`pip install -v` shows it). Install with `pip install --no-build-isolation .` so the
build sees the torch you already have, as flash-attn does.

The toolkit's root is, in this order: CUDA_HOME (or CUDA_PATH) when set; else the folder nvcc
reports for itself (`nvcc -v --dryrun`, which also sees through a wrapper script on PATH), torch's
own guess, /usr/local/cuda and /usr/local/cuda-*, the first that holds bin/nvcc and
include/cuda_runtime_api.h with torch's CUDA major version.

With a ROCm build of torch, the AMD kernels (the gfx9 family) are compiled through torch's
extension machinery (hipcc) for the targets of PYTORCH_ROCM_ARCH that flashsplit has kernels
for and the compiler supports (default: gfx90a, gfx942 and gfx950).

Environment:
  TORCH_CUDA_ARCH_LIST  NVIDIA archs to compile for (default "8.0;9.0a")
  PYTORCH_ROCM_ARCH     AMD targets to compile for (default "gfx90a;gfx942;gfx950")
  MAX_JOBS              parallel compile jobs (read by torch's BuildExtension)
  FLASHSPLIT_CPU_ONLY=1 skip the GPU kernels even where they could be built
  CUDA_HOME             the CUDA toolkit's root, where it is not found by itself
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

from setuptools import find_packages, setup

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# Head dims with kernel instances (csrc/core/head_dims.h): the NVIDIA kernels' (sm80, sm90) and
# the AMD kernels' (gfx9).
NVIDIA_HEAD_DIMS = (64, 96, 128, 192, 256)
AMD_HEAD_DIMS = (64, 128)
DEFAULT_ARCHS = "8.0;9.0a"
AMD_TARGETS = ("gfx90a", "gfx942", "gfx950")  # the gfx9 family's targets


def say(message):
    """A line of the build's own output (pip shows it with -v, or when the build fails)."""
    print("flashsplit setup: " + message, flush=True)


def rel(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern), recursive=True))


def build_id(options):
    """A digest of the sources and the options of this build: what a verify stamp is bound to."""
    digest = hashlib.sha256(repr(sorted(options)).encode())
    for path in sorted(glob.glob(os.path.join(HERE, "csrc", "**", "*"), recursive=True)):
        if os.path.isfile(path):
            digest.update(os.path.relpath(path, HERE).encode())
            with open(path, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------ the CUDA toolkit

# Headers torch's ATen/cuda/CUDAContext.h includes besides the runtime's: a toolkit without the
# CUDA libraries (cuSPARSE, cuBLAS, cuSOLVER) lacks them, but a CUDA build of torch from pip
# brings them in its nvidia-* wheels.
TORCH_CUDA_LIBRARY_HEADERS = ("cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h")

def major_of(version):
    match = re.match(r"^(\d+)", version or "")
    return int(match.group(1)) if match else None


def nvcc_release(nvcc):
    """'13.0' from `nvcc --version`, or None where it does not run."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def nvcc_reported_root(nvcc):
    """The toolkit root nvcc names for itself (its TOP), which a wrapper script on PATH hides."""
    try:
        with tempfile.TemporaryDirectory() as folder:
            probe = os.path.join(folder, "probe.cu")
            with open(probe, "w") as fh:
                fh.write("\n")
            out = subprocess.run([nvcc, "-v", "--dryrun", "-c", probe, "-o", probe + ".o"],
                                 capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.MULTILINE)
    return os.path.realpath(match.group(1).strip()) if match else None


def toolkit_problem(root, torch_major):
    """Why `root` cannot build the kernels for this torch ("" when it can), and its release."""
    nvcc = os.path.join(root, "bin", "nvcc")
    if not os.path.isfile(nvcc):
        return "%s has no bin/nvcc" % root, None
    if not os.path.isfile(os.path.join(root, "include", "cuda_runtime_api.h")):
        return "%s has no include/cuda_runtime_api.h (not a CUDA toolkit root)" % root, None
    release = nvcc_release(nvcc)
    if release is None:
        return "%s/bin/nvcc --version did not report a release" % root, None
    if major_of(release) != torch_major:
        return ("%s holds CUDA %s, but this torch was built with CUDA %s: the major versions must "
                "match" % (root, release, torch.version.cuda)), release
    return "", release


def wheel_include_dirs():
    """The include folders of the nvidia-* wheels installed beside torch (site-packages/nvidia/
    */include: one per library for CUDA 12 wheels, cu13/include for CUDA 13)."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    return sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))


def library_header_dirs(root):
    """(extra include folders, missing headers): where each of TORCH_CUDA_LIBRARY_HEADERS is
    found, the toolkit's own include folder first, then the nvidia-* wheels'."""
    extra, missing = [], []
    for header in TORCH_CUDA_LIBRARY_HEADERS:
        if os.path.isfile(os.path.join(root, "include", header)):
            continue
        found = [d for d in wheel_include_dirs() if os.path.isfile(os.path.join(d, header))]
        if not found:
            missing.append(header)
        elif found[0] not in extra:
            extra.append(found[0])
    return extra, missing


def find_cuda_toolkit():
    """(root, release, "") for a toolkit that can build the kernels, else (None, None, reason)."""
    torch_major = major_of(torch.version.cuda)
    chosen = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if chosen:
        # The user's choice is kept: a wrong one is reported rather than replaced.
        problem, release = toolkit_problem(os.path.realpath(chosen), torch_major)
        return (None, None, "CUDA_HOME=%s: %s" % (chosen, problem)) if problem else \
            (os.path.realpath(chosen), release, "")
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(nvcc_reported_root(nvcc))
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates.append("/usr/local/cuda")
    candidates += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    problems, seen = [], set()
    for root in candidates:
        if not root or not os.path.isdir(root) or os.path.realpath(root) in seen:
            continue
        root = os.path.realpath(root)
        seen.add(root)
        problem, release = toolkit_problem(root, torch_major)
        if not problem:
            return root, release, ""
        problems.append(problem)
    if not problems:
        return None, None, "no CUDA toolkit found (no nvcc on PATH, no /usr/local/cuda*)"
    return None, None, "no usable CUDA toolkit: " + "; ".join(problems)


def gpu_build_plan():
    """(True, toolkit root, release, extra include folders) to build the GPU kernels, or
    (False, reason, advice, None)."""
    if os.environ.get("FLASHSPLIT_CPU_ONLY") == "1":
        return False, "FLASHSPLIT_CPU_ONLY=1", "unset it to build the GPU kernels", None
    if torch.version.cuda is None:
        return (False, "this torch (%s) is a CPU-only build" % torch.__version__,
                "for the GPU kernels install a CUDA build of torch whose CUDA major version "
                "matches your CUDA toolkit, then reinstall flashsplit", None)
    root, release, reason = find_cuda_toolkit()
    if root is None:
        where = ("point CUDA_HOME at it (the folder holding bin/nvcc and include/) or unset it"
                 if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
                 else "set CUDA_HOME to its root if it is not found by itself")
        return (False, reason,
                "for the GPU kernels install a CUDA %s.x toolkit (nvcc and headers) and %s, or "
                "install a torch built for the CUDA version you have, then reinstall flashsplit"
                % (major_of(torch.version.cuda), where), None)
    extra, missing = library_header_dirs(root)
    if missing:
        return (False, "the CUDA toolkit at %s lacks %s, which torch's CUDA headers include, and "
                "no nvidia-* wheel beside torch has them" % (root, ", ".join(missing)),
                "for the GPU kernels install the CUDA %s.x libraries' development headers "
                "(cuSPARSE, cuBLAS, cuSOLVER) into that toolkit, then reinstall flashsplit"
                % major_of(torch.version.cuda), None)
    return True, root, release, extra


# ------------------------------------------------------------------ the extension

def arch_numbers(arch_list):
    """'8.0;9.0a' -> [80, 90]: the compute capabilities the gate may admit."""
    archs = []
    for item in re.split(r"[;\s,]+", arch_list.strip()):
        match = re.match(r"^(\d+)\.(\d+)", item)
        if not match:
            raise SystemExit("flashsplit: cannot read TORCH_CUDA_ARCH_LIST entry %r" % item)
        archs.append(int(match.group(1)) * 10 + int(match.group(2)))
    return sorted(set(archs))


# ------------------------------------------------------------------ ROCm

def hip_compiler():
    """ROCm's hipcc (ROCM_HOME/bin/hipcc as torch finds it, else on PATH), or None."""
    from torch.utils import cpp_extension
    root = cpp_extension.ROCM_HOME
    candidate = os.path.join(root, "bin", "hipcc") if root else None
    return candidate if candidate and os.path.isfile(candidate) else shutil.which("hipcc")


# The gfx9 kernels load K and V through buffer resources: the probe needs those builtins (clang
# 19 or later), not just the target.
BUFFER_PROBE = """
__global__ void probe(float* x) {
  __amdgpu_buffer_rsrc_t rows = __builtin_amdgcn_make_buffer_rsrc(x, 0, 64, 0x00020000);
  x[0] = __builtin_bit_cast(float, __builtin_amdgcn_raw_buffer_load_b32(rows, 4, 0, 0));
}
"""


def compiles_for(hipcc, target):
    """Whether hipcc builds the gfx9 kernels' device code for the AMD target."""
    with tempfile.TemporaryDirectory() as folder:
        probe = os.path.join(folder, "probe.hip")
        with open(probe, "w") as fh:
            fh.write(BUFFER_PROBE)
        try:
            done = subprocess.run([hipcc, "-x", "hip", "--offload-arch=" + target,
                                   "--offload-device-only", "-c", probe, "-o", probe + ".o"],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


def amd_targets():
    """(targets to build, why some asked for are left out)."""
    asked = [t for t in re.split(r"[;\s,]+", os.environ.get("PYTORCH_ROCM_ARCH", "")) if t]
    asked = [t.split(":")[0] for t in asked] or list(AMD_TARGETS)
    hipcc = hip_compiler()
    if hipcc is None:
        return [], "no hipcc found (install ROCm, or set ROCM_HOME)"
    targets, left_out = [], []
    for target in asked:
        if target not in AMD_TARGETS:
            left_out.append("%s (flashsplit has kernels for %s only)" % (target, ", ".join(AMD_TARGETS)))
        elif not compiles_for(hipcc, target):
            left_out.append("%s (%s cannot build for it, or lacks the buffer-resource builtins "
                            "of clang 19 or later)" % (target, hipcc))
        else:
            targets.append(target)
    return targets, "; ".join(left_out)


def rocm_extension(sources, include_dirs, cxx_flags):
    """The extension with the AMD kernels, or the CPU-only one where none can be built."""
    from torch.utils import cpp_extension
    targets, left_out = amd_targets()
    if left_out:
        say("AMD targets left out: " + left_out)
    if not targets:
        say("building the CPU-only module (every call takes the reference path): no AMD target "
            "to build for this ROCm torch (%s)" % torch.version.hip)
        return cpp_extension, cpp_extension.CppExtension(
            "flashsplit._C", sources, include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags + ["-DFLASHSPLIT_BUILD_ID=0x%s" % build_id([])]})
    os.environ["PYTORCH_ROCM_ARCH"] = ";".join(targets)
    say("building the AMD kernels for %s with ROCm %s (torch %s)" %
        (", ".join(targets), torch.version.hip, torch.__version__))
    switches = ["-DFLASHSPLIT_WITH_CUDA", "-DFLASHSPLIT_WITH_HIP"] + \
        ["-DFLASHSPLIT_AMD_%s" % t.upper() for t in targets]
    defines = switches + ["-DFLASHSPLIT_HEAD_DIMS=" + ",".join(map(str, AMD_HEAD_DIMS)),
                          "-DFLASHSPLIT_BUILD_ID=0x%s" % build_id(targets)]
    return cpp_extension, cpp_extension.CUDAExtension(
        "flashsplit._C",
        sources + rel("csrc/kernels/*.cu") + rel("csrc/kernels/gfx9/*.cu"),
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags + defines, "nvcc": ["-O3", "-std=c++17"] + switches},
    )


# ------------------------------------------------------------------ the extension

def extension():
    sources = rel("csrc/core/*.cpp") + rel("csrc/torch/*.cpp")
    include_dirs = [os.path.join(HERE, "csrc")]
    cxx_flags = ["-O3"]  # the C++ standard is torch's choice (its headers need it)
    if getattr(torch.version, "hip", None) and os.environ.get("FLASHSPLIT_CPU_ONLY") != "1":
        return rocm_extension(sources, include_dirs, cxx_flags)
    build_gpu, where, detail, extra_includes = gpu_build_plan()
    if not build_gpu:
        say("building the CPU-only module (every call takes the reference path): %s. %s." %
            (where, detail[0].upper() + detail[1:]))
        from torch.utils import cpp_extension
        return cpp_extension, cpp_extension.CppExtension(
            "flashsplit._C", sources, include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags + ["-DFLASHSPLIT_BUILD_ID=0x%s" % build_id([])]})
    # torch reads CUDA_HOME once, when cpp_extension is imported; the root found above wins.
    os.environ["CUDA_HOME"] = where
    from torch.utils import cpp_extension
    cpp_extension.CUDA_HOME = where
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCHS)
    say("building the GPU kernels for TORCH_CUDA_ARCH_LIST=%s with CUDA %s at %s (torch %s, "
        "CUDA %s)" % (os.environ["TORCH_CUDA_ARCH_LIST"], detail, where, torch.__version__,
                      torch.version.cuda))
    if extra_includes:
        # The toolkit's own headers first; the wheels' only for what it lacks.
        say("CUDA library headers from %s" % ", ".join(extra_includes))
        include_dirs += [os.path.join(where, "include")] + extra_includes
    archs = arch_numbers(os.environ["TORCH_CUDA_ARCH_LIST"])
    defines = [
        "-DFLASHSPLIT_WITH_CUDA",
        "-DFLASHSPLIT_BUILT_ARCHS=" + ",".join(map(str, archs)),
        "-DFLASHSPLIT_HEAD_DIMS=" + ",".join(map(str, NVIDIA_HEAD_DIMS)),
    ]
    # nvcc reads commas in -D values as list separators: the kernels need only the switch.
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo", "-DFLASHSPLIT_WITH_CUDA"]
    # The Hopper kernels need the arch-specific sm_90a target (wgmma, setmaxnreg).
    if re.search(r"(^|[;\s,])9\.0a", os.environ["TORCH_CUDA_ARCH_LIST"]):
        defines.append("-DFLASHSPLIT_WITH_HOPPER")
    defines.append("-DFLASHSPLIT_BUILD_ID=0x%s" % build_id(defines))
    if os.environ.get("FLASHSPLIT_PTXAS_VERBOSE") == "1":
        nvcc_flags.append("-Xptxas=-v")
    return cpp_extension, cpp_extension.CUDAExtension(
        "flashsplit._C",
        sources + rel("csrc/kernels/*.cu") + rel("csrc/kernels/sm80/*.cu") +
        rel("csrc/kernels/sm90/*.cu"),
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags + defines, "nvcc": nvcc_flags},
    )


cpp_extension, ext = extension()

setup(
    name="flashsplit",
    version="0.1.0",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[ext],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
