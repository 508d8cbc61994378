# Scratch: one flashsplit and one SDPA cuDNN call per point, for ncu.
import sys, torch, flashsplit
for d, s, dt in [(64, 1024, torch.float16), (128, 512, torch.bfloat16)]:
    b, h = 16384 // s, 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    for _ in range(2):
        flashsplit.flash_attn_func(q, k, v)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
    torch.cuda.synchronize()
