"""Verify stamps: the record that `python -m flashsplit.verify` passed on a GPU for a build.

The gate admits a GPU whose arch is not in the table of tested hardware only where a stamp for
that GPU (name and arch) and this build (build_info()["build_id"]) exists; a failed verify run
removes the stamp. Stamps live in one JSON file in flashsplit's cache folder.
"""

import json
import os
import tempfile
import threading
import time

from . import _C

STAMP_FILE = "verified.json"
CACHE_DIR_ENV = "FLASHSPLIT_CACHE_DIR"
_FORMAT = 1
_lock = threading.Lock()
_verified = {}  # device index -> bool, for this process


def cache_dir():
    """$FLASHSPLIT_CACHE_DIR, else $XDG_CACHE_HOME/flashsplit, else ~/.cache/flashsplit."""
    explicit = os.environ.get(CACHE_DIR_ENV, "").strip()
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flashsplit")


def stamp_path():
    return os.path.join(cache_dir(), STAMP_FILE)


def device_identity(index):
    """{"gpu": name, "arch": "sm_90" | "gfx942"} of CUDA (or ROCm) device `index`."""
    import torch

    props = torch.cuda.get_device_properties(index)
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
    else:
        arch = f"sm_{props.major}{props.minor}"
    return {"gpu": props.name, "arch": arch}


def _build_id():
    return str(_C.build_info().get("build_id", ""))


def read_stamps():
    """The stamps on file; [] when there are none or the file is not one this module wrote."""
    try:
        with open(stamp_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return []
    stamps = data.get("stamps")
    return [s for s in stamps if isinstance(s, dict)] if isinstance(stamps, list) else []


def _matches(stamp, identity, build_id):
    return (stamp.get("gpu") == identity["gpu"] and stamp.get("arch") == identity["arch"]
            and stamp.get("build_id") == build_id)


def _write_stamps(stamps):
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".verified-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "stamps": stamps}, f, indent=1, sort_keys=True)
        os.replace(tmp, stamp_path())
    except BaseException:
        os.unlink(tmp)
        raise


def record(index, passed, cases):
    """Writes (passed) or removes (failed) the stamp of device `index` and this build; returns
    the stamp file's path."""
    identity = device_identity(index)
    build_id = _build_id()
    with _lock:
        stamps = [s for s in read_stamps() if not _matches(s, identity, build_id)]
        if passed:
            stamps.append(dict(identity, build_id=build_id, cases=int(cases),
                               date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        _write_stamps(stamps)
        _verified.clear()
    return stamp_path()


def verified_here(index):
    """Whether a stamp for device `index` and this build exists (read once per process)."""
    with _lock:
        if index not in _verified:
            identity = device_identity(index)
            build_id = _build_id()
            _verified[index] = any(_matches(s, identity, build_id) for s in read_stamps())
        return _verified[index]
