# Scratch: per-call times of flashsplit at short d=128 points in a five-method interleave (our
# own shuffled orders and long GPU sleeps between calls, like bench_seqlen's harness).
# python mode_probe.py REPO TAG: the four points of probe_causal_512_three_builds.txt, 40 reps.
# BY_PREDECESSOR=1: the form that wrote probe_d128_512_by_predecessor.txt: the four 512-row
# points, 60 reps, and medians grouped by the method that ran just before (is the wide spread a
# predecessor effect?; its lines then had no tag or s= prefix).
import os, sys, collections, statistics
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
tag = sys.argv[2] if len(sys.argv) > 2 else ""
by_predecessor = os.environ.get("BY_PREDECESSOR") == "1"
PTS = [(True, torch.bfloat16, 512), (True, torch.float16, 512), (True, torch.bfloat16, 1024), (False, torch.bfloat16, 512)]
if by_predecessor:
    PTS = [(c, dt, 512) for c in (True, False) for dt in (torch.bfloat16, torch.float16)]
for causal, dt, s in PTS:
    b, h, d = 16384 // s, 16, 128
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
    q, k, v = sets[0]
    peers = T.peer_runners(torch, q, k, v, causal, ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"])
    fns = {"fs": lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)}
    for name, (fn, *_rest) in peers.items():
        fns[name] = fn
    names = list(fns)
    for f in fns.values():
        for i in range(5): f(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = collections.defaultdict(list)
    import random
    rng = random.Random(0)
    prev = None
    recs = []
    for rep in range(60 if by_predecessor else 40):
        order = names[:]; rng.shuffle(order)
        for j, nm in enumerate(order):
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(200000)
            st.record(); fns[nm](*sets[(rep * 5 + j) % len(sets)]); en.record()
            recs.append((nm, prev, st, en)); prev = nm
    torch.cuda.synchronize()
    for nm, pv, st, en in recs:
        times[(nm, pv)].append(st.elapsed_time(en) * 1e3)
    allfs = sorted(t for (nm, pv), ts in times.items() if nm == "fs" for t in ts)
    allcu = sorted(t for (nm, pv), ts in times.items() if nm == "sdpa_cudnn" for t in ts)
    print(f"{tag} s={s} causal={causal} {str(dt)[6:]}: fs median {statistics.median(allfs):.1f} us p10 {allfs[len(allfs)//10]:.1f} p90 {allfs[9*len(allfs)//10]:.1f}; cudnn median {statistics.median(allcu):.1f} p10 {allcu[len(allcu)//10]:.1f} p90 {allcu[9*len(allcu)//10]:.1f}", flush=True)
    print(f"  {tag} ratio cudnn/fs median {statistics.median(allcu) / statistics.median(allfs):.3f}; fs sorted:", " ".join(f"{t:.0f}" for t in allfs), flush=True)
    if by_predecessor:
        for nm in ("fs", "sdpa_cudnn"):
            for pv in names:
                ts = times.get((nm, pv))
                if ts:
                    print(f"  {nm} after {pv}: n={len(ts)} median {statistics.median(ts):.1f} min {min(ts):.1f} max {max(ts):.1f}", flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
