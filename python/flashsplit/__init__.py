"""flashsplit: exact attention forward with split-KV GPU kernels, flash-attn's API.

    from flashsplit import flash_attn_func, explain
    out = flash_attn_func(q, k, v, causal=True)       # q (b, sq, h, d), k/v (b, sk, hk, d)
    explain(q, k, v, causal=True)                      # which path/kernel/G, and why
"""

__version__ = "0.1.0"

from .interface import explain, flash_attn_func, reference_attention  # noqa: E402

__all__ = ["flash_attn_func", "explain", "reference_attention", "__version__"]
