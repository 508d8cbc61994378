#!/usr/bin/env bash
# Session 21: L2 eviction hints on TMA copies (0 none, 1 Q+O first, 2 +K/V last, 3 O first)
set -u
REPO=$PWD
t0=$SECONDS
cp csrc/kernels/sm90/fwd_kernel.cuh /tmp/fwd_kernel.orig
build() {
  cp /tmp/fwd_kernel.orig csrc/kernels/sm90/fwd_kernel.cuh
  sed -i "s/^#define FS_L2_HINTS 0$/#define FS_L2_HINTS $2/" csrc/kernels/sm90/fwd_kernel.cuh
  grep -c "define FS_L2_HINTS $2" csrc/kernels/sm90/fwd_kernel.cuh
  TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_$1.log 2>&1 || { echo "build $1 failed"; tail -20 $OUT/build_$1.log; exit 1; }
  PKG=$(cd /tmp && python -c "import flashsplit, os; print(os.path.dirname(flashsplit.__file__))")
  mkdir -p /tmp/var_$1 && cp -r $PKG /tmp/var_$1/
}
build h0 0
build h1 1
build h2 2
build h3 3
echo "built in $((SECONDS-t0)) s"
timeout 100 python -m pytest -q -m gpu tests -x -k "forward and not split_count" 2>&1 | tail -2 | tee $OUT/pytest_h3.txt
cd /tmp
for r in 1 2; do
  for v in h0 h1 h2 h3; do
    PYTHONPATH=/tmp/var_$v timeout 150 python $REPO/.scratch_run/pf_points.py $REPO $v $r 2>&1 | tee -a $OUT/pf.txt
  done
done
echo "done in $((SECONDS-t0)) s"
