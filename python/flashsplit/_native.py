"""The one place that talks to the C++ extension flashsplit._C (gate, heuristic, kernels)."""

import os

from . import _C, _stamp

_TRUE_WORDS = ("1", "true", "yes", "on")
_GPU_KERNELS_BUILT = bool(_C.build_info()["gpu_kernels_built"])


def env_flag(name):
    """True when the environment variable is set to 1/true/yes/on (any case)."""
    return os.environ.get(name, "").strip().lower() in _TRUE_WORDS


def strict_from_env():
    return env_flag("FLASHSPLIT_STRICT")


def arch_verified(t):
    """Whether a verify stamp admits the GPU tensor t lives on (False off the GPU, or where the
    build has no GPU kernels: the gate refuses those before it looks at the GPU)."""
    if not t.is_cuda or not _GPU_KERNELS_BUILT:
        return False
    return _stamp.verified_here(t.device.index if t.device.index is not None else 0)


def gate_decision(q, k, v, causal, dropout_p, window_left, window_right, softcap, has_alibi,
                  num_splits):
    """The call's plan as a plain dict (explain()'s form); runs nothing.

    window_right is passed as the caller gave it after folding causal in: with causal the right
    bound is implied, so only a left window is an extra feature the kernels must support.
    """
    decision = _C.explain(q, k, v, causal, float(dropout_p), window_left,
                          -1 if causal else window_right, float(softcap), has_alibi,
                          num_splits, arch_verified(q))
    decision = dict(decision)
    decision["details"] = dict(decision["details"])
    return decision


def run(q, k, v, softmax_scale, causal, dropout_p, window_left, window_right, softcap,
        has_alibi, num_splits):
    """The lean call: (out, lse) from the native kernels, or the gate's reason (a str) when it
    refuses the call. One plan, made in C++; window_right as in gate_decision."""
    return _C.run(q, k, v, softmax_scale, causal, dropout_p, window_left,
                  -1 if causal else window_right, softcap, has_alibi, num_splits,
                  arch_verified(q))


def native_forward(q, k, v, softmax_scale, causal, num_splits):
    return _C.forward(q, k, v, float(softmax_scale), causal, num_splits, arch_verified(q))


def native_forward_recorded(q, k, v, softmax_scale, causal, num_splits):
    """(out, lse, plan, record): the forward, the plan it ran (explain()'s form) and what its
    launchers ran (the keys of the plan's details they set)."""
    out, lse, plan, record = _C.forward_recorded(q, k, v, float(softmax_scale), causal,
                                                 num_splits, arch_verified(q))
    return out, lse, dict(plan), dict(record)


def run_sequences(q, k, v, seqs, softmax_scale, causal, dropout_p, window_left, window_right,
                  softcap, has_alibi, num_splits):
    """run() for a call of sequences of their own lengths."""
    return _C.run_sequences(q, k, v, seqs.cu_seqlens_q, seqs.cu_seqlens_k, seqs.seqused_k,
                            seqs.kv_batch_idx, seqs.block_table, seqs.max_seqlen_q,
                            seqs.max_seqlen_k, softmax_scale, causal, dropout_p, window_left,
                            -1 if causal else window_right, softcap, has_alibi, num_splits,
                            arch_verified(q))


def sequence_gate_decision(q, k, v, seqs, causal, num_splits):
    """gate_decision() for a call of sequences of their own lengths (the kernel features only:
    a window, softcap, ALiBi or dropout goes to the reference path before it is planned)."""
    decision = dict(_C.explain_sequences(
        q, k, v, seqs.cu_seqlens_q, seqs.cu_seqlens_k, seqs.seqused_k, seqs.kv_batch_idx,
        seqs.block_table, seqs.max_seqlen_q, seqs.max_seqlen_k, causal, num_splits,
        arch_verified(q)))
    decision["details"] = dict(decision["details"])
    return decision


def build_info():
    return dict(_C.build_info())
