# Scratch: flashsplit and SDPA cuDNN at short points, bench timing; run once per build variant.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
tag = sys.argv[2]
print(tag, os.path.dirname(flashsplit.__file__), flush=True)
q, k, v = (torch.randn(3, 1000, 7, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
ref = torch.nn.functional.scaled_dot_product_attention(*(t.float().transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
print(tag, "check err", float((flashsplit.flash_attn_func(q, k, v).float() - ref).abs().max()), flush=True)
for d, s, causal in [(64, 512, False), (64, 1024, False), (64, 2048, False), (128, 512, False), (128, 1024, False),
                     (128, 2048, False), (128, 512, True), (64, 1024, True), (128, 8192, False)]:
    b, h = 16384 // s, 2048 // d
    sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
    q, k, v = sets[0]
    fl = T.attention_flops(b, h, s, s, d, causal)
    cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    fs = lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)
    tim = T.time_cuda_interleaved(torch, [fs, cud], sets, 5, 40)
    a, c = tim[0]["median_ms"], tim[1]["median_ms"]
    print(f"{tag} d={d} s={s} causal={causal}: fs {fl / a / 1e9:.0f} cudnn {fl / c / 1e9:.0f} x_cudnn {c / a:.3f}", flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
