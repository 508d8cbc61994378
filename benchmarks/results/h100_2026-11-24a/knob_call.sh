#!/usr/bin/env bash
set -u
REPO=$PWD
t0=$SECONDS
rm -rf csrc && cp -r .scratch_run/knob_csrc/csrc csrc
TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 timeout 240 python -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --force-reinstall --no-input . > $OUT/build_knob.log 2>&1 || { echo "build failed"; tail -20 $OUT/build_knob.log; exit 1; }
echo "built in $((SECONDS-t0)) s"
cd /tmp
for r in 1 2; do
  timeout 200 python $REPO/.scratch_run/knob_probe.py $REPO 2>&1 | tee -a $OUT/knob.txt
done
echo "done in $((SECONDS-t0)) s"
