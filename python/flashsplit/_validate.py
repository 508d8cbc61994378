"""Argument checks shared by flash_attn_func, explain and reference_attention.

Every check raises before any work is done, with a message that names the argument and the
value it got, so a bad call never reaches the gate or a kernel. Valid input that the native
kernels merely cannot serve (CPU tensors, fp32, a non-contiguous last dim, ...) is NOT an
error here: the dispatcher falls back to the reference path for it.
"""

import math
import numbers

import torch

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# The checks run on every call, so the common types are tested first by identity: an isinstance
# against the numbers ABCs costs several times more.

def _is_real_number(value):
    # bool is an int subclass; True as a probability or a cap is almost certainly a mistake.
    kind = type(value)
    if kind is float or kind is int:
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value):
    if type(value) is int:
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_finite(value):
    # Comparisons rather than math.isfinite, which torch.compile(dynamic=True) cannot trace on
    # a symbolic float. NaN fails the first.
    return value == value and -math.inf < value < math.inf


_INT64_MAX = (1 << 63) - 1
# A window side this wide covers every key of any call the kernels can take (sk < 2^31), so it
# means unbounded, like -1; kept as is, it would overflow the int64 arithmetic of the mask.
_UNBOUNDED_WINDOW = 1 << 31
_NO_WINDOW = (-1, -1)


def check_float_tensor(name, t, dims, layout):
    """t is a floating-point tensor of `dims` dims (layout names them in the message)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{name} must have {dims} dims {layout}, got shape {tuple(t.shape)}")
    if t.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name}.dtype must be float16, bfloat16, float32 or float64, got {t.dtype}")


def check_like_q(name, t, q):
    """t has q's dtype and device."""
    if t.dtype != q.dtype:
        raise TypeError(f"{name}.dtype {t.dtype} differs from q.dtype {q.dtype}")
    if t.device != q.device:
        raise ValueError(f"{name} is on {t.device} but q is on {q.device}")


def check_same_shape(name, t, other_name, other):
    if t.shape != other.shape:
        raise ValueError(f"{name} must have the same shape as {other_name}, got {name} "
                         f"{tuple(t.shape)} and {other_name} {tuple(other.shape)}")


def check_heads(q, k, q_name="q", k_name="k"):
    """k's head dim is q's and positive, and its heads divide q's (the last two dims)."""
    h, d = q.shape[-2], q.shape[-1]
    hk = k.shape[-2]
    if k.shape[-1] != d:
        raise ValueError(f"{k_name} has head dim {k.shape[-1]} but {q_name} has head dim {d}")
    if d == 0:
        raise ValueError(f"head dim must be positive, got {q_name} shape {tuple(q.shape)}")
    if hk == 0 or h % hk != 0:
        raise ValueError(
            f"the number of query heads ({h}) must be a multiple of the number of key/value "
            f"heads ({hk}); got {q_name} shape {tuple(q.shape)} and {k_name} shape "
            f"{tuple(k.shape)}")


def check_qkv(q, k, v):
    """q (b, sq, h, d), k (b, sk, hk, d) and v (b, sk, hk, dv): v's head dim may differ from
    q's and k's (FlashAttention-3's headdim_v); the output has v's."""
    check_float_tensor("q", q, 4, "(b, sq, h, d)")
    check_float_tensor("k", k, 4, "(b, sk, hk, d)")
    check_float_tensor("v", v, 4, "(b, sk, hk, dv)")
    for name, t in (("k", k), ("v", v)):
        check_like_q(name, t, q)
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must have k's batch, keys and heads, got v {tuple(v.shape)} and k "
                         f"{tuple(k.shape)}")
    if v.shape[3] == 0:
        raise ValueError(f"v's head dim must be positive, got v shape {tuple(v.shape)}")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"k has batch {k.shape[0]} but q has batch {q.shape[0]}")
    check_heads(q, k)


def check_options(q, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                  num_splits=0, batch=None):
    """Checks the options; returns (causal, window_left, window_right) as the kernels take them
    (window_bounds)."""
    if not _is_real_number(dropout_p):
        raise TypeError(f"dropout_p must be a real number, got {dropout_p!r}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
    if softmax_scale is not None:
        if not _is_real_number(softmax_scale):
            raise TypeError(f"softmax_scale must be None or a real number, got {softmax_scale!r}")
        if not _is_finite(softmax_scale):
            raise ValueError(f"softmax_scale must be finite, got {softmax_scale!r}")
    causal = flag("causal", causal)
    window = window_bounds(window_size)
    if not _is_real_number(softcap):
        raise TypeError(f"softcap must be a real number, got {softcap!r}")
    if not softcap >= 0.0 or not _is_finite(softcap):
        raise ValueError(f"softcap must be finite and >= 0 (0 = off), got {softcap!r}")
    if alibi_slopes is not None:
        _check_alibi_slopes(q, alibi_slopes, q.shape[0] if batch is None else batch)
    if not _is_int(num_splits):
        raise TypeError(f"num_splits must be an int, got {num_splits!r}")
    if num_splits < 0:
        raise ValueError(
            f"num_splits must be >= 0 (0 = auto, 1 = no split, >= 2 = forced), got {num_splits}")
    if num_splits > _INT64_MAX:
        raise ValueError(f"num_splits must fit in int64, got {num_splits}")
    return (causal,) + window


def window_bounds(window_size):
    """(left, right) of a valid window_size: ints >= -1 that fit in int64; sides of 2^31 or
    more mean unbounded and come back as -1."""
    if window_size == _NO_WINDOW and type(window_size[0]) is int and type(window_size[1]) is int:
        return _NO_WINDOW
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or not all(_is_int(w) for w in window_size)):
        raise TypeError(f"window_size must be a pair of ints (left, right), got {window_size!r}")
    if window_size[0] < -1 or window_size[1] < -1:
        raise ValueError(
            f"window_size values must be >= -1 (-1 = unbounded), got {tuple(window_size)!r}")
    if window_size[0] > _INT64_MAX or window_size[1] > _INT64_MAX:
        raise ValueError(f"window_size values must fit in int64, got {tuple(window_size)!r}")
    return tuple(-1 if w >= _UNBOUNDED_WINDOW else int(w) for w in window_size)


def _check_alibi_slopes(q, slopes, b):
    if not isinstance(slopes, torch.Tensor):
        raise TypeError(f"alibi_slopes must be None or a torch.Tensor, got {type(slopes).__name__}")
    h = q.shape[-2]
    if tuple(slopes.shape) not in ((h,), (b, h)):
        raise ValueError(
            f"alibi_slopes must have shape (h,) = ({h},) or (b, h) = ({b}, {h}), "
            f"got {tuple(slopes.shape)}")
    if slopes.dtype != torch.float32:
        raise TypeError(f"alibi_slopes.dtype must be float32, got {slopes.dtype}")
    if slopes.device != q.device:
        raise ValueError(f"alibi_slopes is on {slopes.device} but q is on {q.device}")


def flag(name, value):
    """A boolean argument as bool. Takes what flash-attn takes: bool, the ints 0 and 1, NumPy
    bools and 0-d bool tensors."""
    if isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and value.dtype == torch.bool:
            return bool(value.item())
    elif type(value).__module__ == "numpy" and getattr(value, "shape", None) == () \
            and value.dtype.kind == "b":
        return bool(value)
    elif _is_int(value) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {value!r}")
