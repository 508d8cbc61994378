# Scratch A/B of session 18's two walk changes, each against the walk before it in ONE build: the
# scratch build read an environment variable in the launcher and set a HopperFwdParams flag (both
# removed when the change shipped, so this runs only against that build). bench_seqlen timing,
# interleaved with cuDNN, three rounds, the order of the two variants alternated.
#   --walk rotate:   FS_NO_ROTATE=1 turned the rotated rounds off (ab_rotate_rounds.txt)
#   --walk backward: FS_SNAKE_LAST=1 turned the backward last round on (ab_backward_last_round.txt)
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import _timing as T
import torch, flashsplit

WALKS = {  # env var, value of the var for the new walk (None: unset), causal, check shapes, points
    "rotate": ("FS_NO_ROTATE", None, False,
               [(8, 16, 2048, 2048, 128), (8, 32, 2048, 2048, 64), (3, 7, 1000, 1500, 128),
                (5, 9, 777, 4096, 64), (2, 16, 4096, 4096, 128), (16, 32, 512, 512, 64),
                (1, 3, 300, 200, 128)],
               [(128, 2048), (64, 2048), (128, 512), (128, 1024), (128, 4096), (64, 512),
                (64, 1024), (64, 4096), (128, 8192)]),
    "backward": ("FS_SNAKE_LAST", "1", True,
                 [(32, 16, 512, 512, 128), (16, 16, 1024, 1024, 128), (3, 7, 1000, 1500, 128),
                  (5, 9, 777, 700, 64), (2, 16, 4096, 4096, 128), (4, 16, 1024, 1024, 64),
                  (1, 3, 300, 200, 128)],
                 [(128, 512), (128, 1024), (128, 2048), (64, 512), (64, 1024)]),
}
args = argparse.ArgumentParser()
args.add_argument("--walk", choices=sorted(WALKS), required=True)
var, new_value, causal, checks, points = WALKS[args.parse_args().walk]


def variant(new):
    value = new_value if new else ("1" if new_value is None else None)
    def run(q, k, v):
        if value is not None:
            os.environ[var] = value
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal)
        finally:
            os.environ.pop(var, None)
    return run


bad = 0
for i, (b, h, sq, sk, d) in enumerate(checks):
    dt = torch.float16 if i % 2 else torch.bfloat16
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt) for s in (sq, sk, sk))
    new, old = variant(True)(q, k, v), variant(False)(q, k, v)
    mask = torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril(sk - sq) if causal else None
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.float().transpose(1, 2) for t in (q, k, v)), attn_mask=mask).transpose(1, 2)
    err = float(torch.nan_to_num((new.float() - ref).abs(), nan=0.0).max())  # rows seeing no key
    ok = torch.equal(new, old) and err < 2e-2
    bad += not ok
    print(f"check b{b} h{h} sq{sq} sk{sk} d{d} {dt}: identical={torch.equal(new, old)} "
          f"err={err:.4f} {'ok' if ok else 'FAIL'}", flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
for rnd in range(3):
    for d, s in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, causal)
        cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        names, pair = ["new", "old"], [variant(True), variant(False)]
        if rnd % 2:
            names, pair = names[::-1], pair[::-1]
        tim = T.time_cuda_interleaved(torch, pair + [cud], sets, 5, 30)
        ms = {n: t["median_ms"] for n, t in zip(names + ["cudnn"], tim)}
        print(f"r{rnd} causal={causal} d={d} s={s}: new {fl / ms['new'] / 1e9:.0f} old "
              f"{fl / ms['old'] / 1e9:.0f} cudnn {fl / ms['cudnn'] / 1e9:.0f} | new/old "
              f"{ms['old'] / ms['new']:.4f} x_cudnn new {ms['cudnn'] / ms['new']:.3f} old "
              f"{ms['cudnn'] / ms['old']:.3f}", flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
