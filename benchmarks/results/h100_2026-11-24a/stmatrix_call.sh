#!/usr/bin/env bash
# Session 21: old (60d001a csrc) vs new (working tree: stmatrix epilogue), alternated processes.
set -u
REPO=$PWD
t0=$SECONDS
cp -r csrc /tmp/new_csrc
build() {
  rm -rf csrc && cp -r $2 csrc
  TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_$1.log 2>&1 || { echo "build $1 failed"; tail -20 $OUT/build_$1.log; exit 1; }
  PKG=$(cd /tmp && python -c "import flashsplit, os; print(os.path.dirname(flashsplit.__file__))")
  mkdir -p /tmp/var_$1 && cp -r $PKG /tmp/var_$1/
}
build old .scratch_run/old_csrc_60d/csrc
build new /tmp/new_csrc
echo "built in $((SECONDS-t0)) s"
timeout 200 python -m pytest -q -m gpu tests -x 2>&1 | tail -3 | tee $OUT/pytest_gpu.txt
echo "tests done at $((SECONDS-t0)) s"
cd /tmp
for v in old new; do PYTHONPATH=/tmp/var_$v python $REPO/.scratch_run/outs.py $v; done
python - <<'PY' | tee -a $OUT/ab.txt
import torch
a, b = torch.load("/tmp/outs_old.pt"), torch.load("/tmp/outs_new.pt")
for k in a:
    print("old-vs-new", k, "out identical", bool(torch.equal(a[k][0], b[k][0])), "lse identical", bool(torch.equal(a[k][1], b[k][1])))
PY
for r in 1 2; do
  for v in old new; do
    PYTHONPATH=/tmp/var_$v timeout 150 python $REPO/.scratch_run/pf_points.py $REPO $v $r 2>&1 | tee -a $OUT/ab.txt
  done
done
echo "done in $((SECONDS-t0)) s"
