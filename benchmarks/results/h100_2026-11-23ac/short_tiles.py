# Scratch: what a 192-row tile with only 128 rows (two of three consumers working) costs against
# a full one, and the makespan of d=128 2048 rows (11 tiles per head, the last one short).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def forced(bm):
    def run(q, k, v):
        os.environ["FS_FORCE_BLOCK_M"] = str(bm)
        try:
            return flashsplit.flash_attn_func(q, k, v)
        finally:
            os.environ.pop("FS_FORCE_BLOCK_M", None)
    return run
plain = lambda q, k, v: flashsplit.flash_attn_func(q, k, v)
for d in (128, 64):
    h = 2048 // d
    g = 1408 // h  # batches: b * h = 1408 single-tile heads, all sharing one k/v head per batch
    cases = [  # (label, b, h, hk, sq, sk, runner)
        ("sq192 gqa all full", g, h, 1, 192, 2048, forced(192)),
        ("sq128 gqa all short", g, h, 1, 128, 2048, forced(192)),
        ("sq64 gqa one consumer", g, h, 1, 64, 2048, forced(192)),
        ("sq128 gqa base tiles", g, h, 1, 128, 2048, forced(128)),
    ]
    for rnd in range(2):
        for label, b, hh, hk, sq, sk, fn in cases:
            sets = T.make_input_sets(torch, b, hh, hk, sq, sk, d, torch.bfloat16)
            q, k, v = sets[0]
            ref = plain(q, k, v)
            out = fn(q, k, v)
            err = float((out.float() - ref.float()).abs().max())
            t = T.time_cuda_interleaved(torch, [fn], sets, 5, 30)[0]["median_ms"]
            fl = T.attention_flops(b, hh, sq, sk, d, False)
            print(f"r{rnd} d={d} {label:32s} b{b} h{hh}: {t*1000:8.1f} us  {fl / t / 1e9:5.0f} TFLOPS  tiles {b*hh*((sq+191)//192)}  err {err:.4f}", flush=True)
            del sets, q, k, v
            torch.cuda.empty_cache()
