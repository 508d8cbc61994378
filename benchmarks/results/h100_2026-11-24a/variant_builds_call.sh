#!/usr/bin/env bash
# Session 21: builds of csrc that differ only in one scratch macro's default (the variant's
# patch, l2_prefetch_variant.patch or l2_hints_variants.patch, applied first), then
# pf_points.py in one process per build, alternated, 2 rounds.
# usage: bash variant_builds_call.sh MACRO TAG:VALUE ...
#   FS_L2_PREFETCH_BLOCKS p0:0 p4:4 p16:16   -> ab_l2_prefetch_tried.txt
#   FS_L2_HINTS h0:0 h1:1 h2:2 h3:3          -> ab_l2_eviction_priorities.txt
set -u
REPO=$PWD
MACRO=$1
shift
t0=$SECONDS
cp csrc/kernels/sm90/fwd_kernel.cuh /tmp/fwd_kernel.orig
tags=()
for spec in "$@"; do
  tag=${spec%%:*} value=${spec#*:}
  cp /tmp/fwd_kernel.orig csrc/kernels/sm90/fwd_kernel.cuh
  sed -i "s/^#define $MACRO 0$/#define $MACRO $value/" csrc/kernels/sm90/fwd_kernel.cuh
  grep -c "define $MACRO $value" csrc/kernels/sm90/fwd_kernel.cuh
  TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_$tag.log 2>&1 || { echo "build $tag failed"; tail -20 $OUT/build_$tag.log; exit 1; }
  PKG=$(cd /tmp && python -c "import flashsplit, os; print(os.path.dirname(flashsplit.__file__))")
  mkdir -p /tmp/var_$tag && cp -r $PKG /tmp/var_$tag/
  tags+=("$tag")
done
echo "built in $((SECONDS-t0)) s"
# The last build installed: the forward GPU tests on it.
timeout 100 python -m pytest -q -m gpu tests -x -k "forward and not split_count" 2>&1 | tail -2 | tee $OUT/pytest_last.txt
cd /tmp
for r in 1 2; do
  for v in "${tags[@]}"; do
    PYTHONPATH=/tmp/var_$v timeout 150 python $REPO/.scratch_run/pf_points.py $REPO $v $r 2>&1 | tee -a $OUT/pf.txt
  done
done
echo "done in $((SECONDS-t0)) s"
