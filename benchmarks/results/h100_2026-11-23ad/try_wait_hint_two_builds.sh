#!/usr/bin/env bash
# Two builds (without / with the try_wait suspend hint of tried_try_wait_suspend_hint.patch, applied
# first), then alternated processes; run from the repo root on the GPU machine with $OUT set.
set -u
REPO=$PWD
build() {
  TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_$1.log 2>&1 || { echo "build $1 failed"; tail -20 $OUT/build_$1.log; exit 1; }
  PKG=$(cd /tmp && python -c "import flashsplit, os; print(os.path.dirname(flashsplit.__file__))")
  mkdir -p /tmp/var_$1 && cp -r $PKG /tmp/var_$1/
}
t0=$SECONDS
build nohint
sed -i '0,/#pragma once/s//#pragma once\n#define FS_SCRATCH_SUSPEND_HINT 0x989680/' csrc/kernels/sm90/hopper_primitives.cuh
grep -n "FS_SCRATCH_SUSPEND_HINT" csrc/kernels/sm90/hopper_primitives.cuh | head -2
build hint
echo "built both in $((SECONDS-t0)) s"
cd /tmp
for r in 1 2; do
  for v in nohint hint; do
    PYTHONPATH=/tmp/var_$v timeout 100 python $REPO/benchmarks/results/h100_2026-11-23ad/try_wait_hint_points.py $REPO $v 2>&1 | tee -a $OUT/ab.txt
  done
done
echo "done in $((SECONDS-t0)) s"
