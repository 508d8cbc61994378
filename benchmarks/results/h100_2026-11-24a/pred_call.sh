#!/usr/bin/env bash
set -u
REPO=$PWD
t0=$SECONDS
TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build.log 2>&1 || { echo "build failed"; tail -20 $OUT/build.log; exit 1; }
echo "built in $((SECONDS-t0)) s"
cd /tmp
SET=${SET:-1} timeout 250 python $REPO/.scratch_run/pred_probe.py $REPO 2>&1 | tee -a $OUT/pred.txt
echo "done in $((SECONDS-t0)) s"
