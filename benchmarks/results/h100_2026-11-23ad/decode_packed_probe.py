# Scratch probe: GQA decode re-packed as an MHA call whose query rows are a k/v head's query heads
# (padded to 17 rows so the Hopper tiles run), against the narrow-tile call and SDPA cuDNN.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit

def packed(q, hk, rows):
    b, _, h, d = q.shape
    g = h // hk
    qp = torch.zeros(b, rows, hk, d, device=q.device, dtype=q.dtype)
    qp[:, :g] = q[:, 0].view(b, hk, g, d).transpose(1, 2)
    return qp

for (b, h, hk, sk, d) in [(8, 32, 8, 4096, 128), (8, 16, 16, 4096, 64), (1, 32, 8, 4096, 128), (8, 32, 8, 16384, 128), (1, 32, 8, 16384, 128)]:
    g = h // hk
    sets = []
    for _ in range(4):
        q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        sets.append((q, k, v, packed(q, hk, 17)))
    q, k, v, qp = sets[0]
    out = flashsplit.flash_attn_func(qp, k, v)[:, :g].transpose(1, 2).reshape(b, 1, h, d)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.float().transpose(1, 2) for t in (q, k, v)), enable_gqa=True).transpose(1, 2)
    print(f"({b},{h},{hk},1,{sk},{d}) packed err {float((out.float() - ref).abs().max()):.4f} explain {flashsplit.explain(qp, k, v).get('num_splits')} {flashsplit.explain(qp, k, v).get('block_m')}", flush=True)
    fns = {"narrow": lambda q, k, v, qp: flashsplit.flash_attn_func(q, k, v),
           "packed": lambda q, k, v, qp: flashsplit.flash_attn_func(qp, k, v)}
    for G in (1, 2, 4, 8, 16):
        fns[f"packedG{G}"] = (lambda G: lambda q, k, v, qp: flashsplit.flash_attn_func(qp, k, v, num_splits=G))(G)
    qt = q.transpose(1, 2)
    cud = T.peer_runners(torch, q, k, v, False, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    fns["cudnn"] = lambda q, k, v, qp: cud(q, k, v)
    names = list(fns)
    tim = T.time_cuda_interleaved(torch, [fns[n] for n in names], sets, 5, 40)
    ms = {n: t["median_ms"] for n, t in zip(names, tim)}
    print(" ".join(f"{n} {ms[n] * 1e3:.1f}us" for n in names) + f" | best packed x_cudnn {ms['cudnn'] / min(ms[n] for n in names if n.startswith('packed')):.3f} narrow x_cudnn {ms['cudnn'] / ms['narrow']:.3f}", flush=True)
