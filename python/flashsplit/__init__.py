"""flashsplit: exact attention forward with split-KV GPU kernels, flash-attn's API.

    from flashsplit import flash_attn_func, explain
    out = flash_attn_func(q, k, v, causal=True)       # q (b, sq, h, d), k/v (b, sk, hk, d)
    explain(q, k, v, causal=True)                      # which path/kernel/G, and why

flash-attn's other entry points are here too: the packed forms (flash_attn_qkvpacked_func,
flash_attn_kvpacked_func), the variable-length ones (flash_attn_varlen_func and its packed
forms) and flash_attn_with_kvcache (contiguous or paged caches).
"""

__version__ = "0.1.0"

from .interface import (  # noqa: E402
    explain, flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
    reference_attention)
from .interface_kvcache import flash_attn_with_kvcache  # noqa: E402
from .interface_varlen import (  # noqa: E402
    flash_attn_varlen_func, flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func)

__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache", "explain",
           "reference_attention", "__version__"]
