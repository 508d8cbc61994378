# Scratch: would cutting a head's query rows into a tall-tile part and a rest part beat one call?
# Times one call against two calls on row slices (sequential launches, no PDL), and cuDNN.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def runner_full(causal):
    return lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)

def runner_mix(cuts, causal):
    def run(q, k, v):
        outs = []
        lo = 0
        for hi in cuts + [q.shape[1]]:
            outs.append(flashsplit.flash_attn_func(q[:, lo:hi], k, v, causal=False))
            lo = hi
        return outs[0]
    return run

points = [  # (d, s, list of cut variants)
    (64, 512, [[384], [256]]),
    (64, 1024, [[768], [512], [960]]),
    (128, 512, [[384], [256]]),
    (128, 1024, [[768], [896], [512]]),
    (128, 2048, [[1920], [1536], [1792]]),
]
for rnd in range(2):
    for d, s, variants in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
        q, k, v = sets[0]
        flops = T.attention_flops(b, h, s, s, d, False)
        names, fns = ["full"], [runner_full(False)]
        for cuts in variants:
            names.append("mix" + "/".join(map(str, cuts)))
            fns.append(runner_mix(cuts, False))
        # correctness of the mix: rows are independent without the mask
        ref = flashsplit.flash_attn_func(q, k, v)
        for cuts in variants:
            lo = 0; diffs = []
            for hi in cuts + [s]:
                part = flashsplit.flash_attn_func(q[:, lo:hi], k, v)
                diffs.append(float((part.float() - ref[:, lo:hi].float()).abs().max()))
                lo = hi
            assert max(diffs) < 2e-2, (d, s, cuts, diffs)
        peer = T.peer_runners(torch, q, k, v, False, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        names.append("cudnn"); fns.append(peer)
        tim = T.time_cuda_interleaved(torch, fns, sets, 5, 30)
        expl = []
        for cuts in variants[:1]:
            lo = 0
            for hi in cuts + [s]:
                e = flashsplit.explain(q[:, lo:hi], k, v, causal=False)
                expl.append(f"{hi-lo}:{dict(e).get('block_m', dict(e))}")
                lo = hi
        cud = tim[-1]["median_ms"]
        row = "  ".join(f"{n} {flops / t['median_ms'] / 1e9:.0f} ({cud / t['median_ms']:.3f})" for n, t in zip(names, tim))
        print(f"r{rnd} d={d} s={s}: {row}   tiles {expl}", flush=True)
        del sets, q, k, v, ref
        torch.cuda.empty_cache()
