# Scratch (session 19): forced tile heights (FS_FORCE_BLOCK_M) and carry (FS_CARRY) at the short
# unmasked points, bench timing. The knobs existed only in the scratch build's launcher (removed);
# run as: python forced_tile_heights.py <repo root>.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit

def variant(env):
    def run(q, k, v):
        os.environ.update(env)
        try:
            return flashsplit.flash_attn_func(q, k, v)
        finally:
            for key in env: os.environ.pop(key, None)
    return run
NT = {"FLASHSPLIT_DISABLE_TAIL_SPLIT": "1"}
for d, s in [(64, 512), (64, 1024), (128, 512), (128, 1024)]:
    b, h = 16384 // s, 2048 // d
    sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
    q, k, v = sets[0]
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.float().transpose(1, 2) for t in (q[:2], k[:2], v[:2]))).transpose(1, 2)
    vs = {"ship": {}, "128": {"FS_FORCE_BLOCK_M": "128"}, "192": {"FS_FORCE_BLOCK_M": "192"},
          "192nt": {"FS_FORCE_BLOCK_M": "192", **NT}}
    if d == 64:
        vs["256"] = {"FS_FORCE_BLOCK_M": "256"}
    else:
        vs["carry1"] = {"FS_CARRY": "1"}
        vs["carry0"] = {"FS_CARRY": "0"}
    ok = {}
    for n, env in list(vs.items()):
        try:
            out = variant(env)(q, k, v)
            err = float((out[:2].float() - ref).abs().max())
            print(f"d={d} s={s} {n}: err {err:.4f}", flush=True)
            if not (err < 2e-2): vs.pop(n)
        except Exception as e:
            print(f"d={d} s={s} {n}: {str(e)[:150]}", flush=True); vs.pop(n)
    fl = T.attention_flops(b, h, s, s, d, False)
    cud = T.peer_runners(torch, q, k, v, False, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    names = list(vs)
    for rnd in range(2):
        tim = T.time_cuda_interleaved(torch, [variant(vs[n]) for n in names] + [cud], sets, 5, 40)
        ms = {n: t["median_ms"] for n, t in zip(names + ["cudnn"], tim)}
        print(f"r{rnd} d={d} s={s}: " + " ".join(f"{n} {fl / ms[n] / 1e9:.0f}" for n in ms) + " | x_cudnn "
              + " ".join(f"{n} {ms['cudnn'] / ms[n]:.3f}" for n in names), flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
