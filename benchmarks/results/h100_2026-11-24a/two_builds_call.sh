#!/usr/bin/env bash
# Session 21: an old csrc tree against the working tree, built side by side, the GPU suite on
# the new build, outputs of fixed inputs compared bit for bit, then the timing script in one
# process per build, alternated, 2 rounds.
# usage: bash two_builds_call.sh OLD_CSRC_DIR tall|pf
#   tall: fastp_points.py with PTS=tall (its round 1 saves the outputs)  -> ab_tall_fast_probabilities.txt
#         (old tree: f84b66d's csrc)
#   pf:   outputs_for_bitwise_compare.py, then pf_points.py              -> ab_stmatrix_epilogue.txt
#         (old tree: 60d001a's csrc)
set -u
REPO=$PWD
OLD=$1
MODE=$2
t0=$SECONDS
cp -r csrc /tmp/new_csrc
build() {
  rm -rf csrc && cp -r $2 csrc
  TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_$1.log 2>&1 || { echo "build $1 failed"; tail -20 $OUT/build_$1.log; exit 1; }
  PKG=$(cd /tmp && python -c "import flashsplit, os; print(os.path.dirname(flashsplit.__file__))")
  mkdir -p /tmp/var_$1 && cp -r $PKG /tmp/var_$1/
}
build old $OLD
build new /tmp/new_csrc
echo "built in $((SECONDS-t0)) s"
timeout 200 python -m pytest -q -m gpu tests -x 2>&1 | tail -3 | tee $OUT/pytest_gpu.txt
echo "tests done at $((SECONDS-t0)) s"
cd /tmp
S=$REPO/.scratch_run
compare() {
  python - <<'PY' | tee -a $OUT/ab.txt
import torch
a, b = torch.load("/tmp/outs_old.pt"), torch.load("/tmp/outs_new.pt")
for k in a:
    print("old-vs-new", k, "identical", bool(torch.equal(a[k][0], b[k][0]) if isinstance(a[k], tuple) else torch.equal(a[k], b[k])))
PY
}
if [ "$MODE" = pf ]; then
  for v in old new; do PYTHONPATH=/tmp/var_$v python $S/outs.py $v; done
  compare
fi
for r in 1 2; do
  for v in old new; do
    if [ "$MODE" = tall ]; then
      PTS=tall PYTHONPATH=/tmp/var_$v timeout 150 python $S/fastp_points.py $REPO $v $r 2>&1 | grep -v "^$v /tmp" | tee -a $OUT/ab.txt
    else
      PYTHONPATH=/tmp/var_$v timeout 150 python $S/pf_points.py $REPO $v $r 2>&1 | tee -a $OUT/ab.txt
    fi
  done
done
[ "$MODE" = tall ] && compare
echo "done in $((SECONDS-t0)) s"
