#!/usr/bin/env bash
# flashsplit's GPU CI job: everything that needs a GPU, checked in one bounded run, on NVIDIA
# (CUDA torch) or AMD (ROCm torch, through torch.cuda) alike.
#   1. environment: nvidia-smi, python / torch / CUDA or ROCm versions
#   2. build: installs the extension from this checkout (no network used)
#   3. verify: python -m flashsplit.verify (the correctness matrix; admits the GPU on a pass)
#   4. GPU tests: python -m pytest -q -m gpu tests (log + junit xml), twice on NVIDIA: as shipped
#      and with FLASHSPLIT_DISABLE_HOPPER=1 (the portable kernels serve every call)
#   5. compute-sanitizer (NVIDIA): memcheck + racecheck on small cases (scripts/sanitize.sh)
#   6. benchmarks: bench_splitkv.py and bench_seqlen.py (CSV + PNG), with the board's power and
#      SM clock sampled meanwhile where nvidia-smi is (benchmarks/power_summary.py)
# and prints a short summary last. Every stage runs under `timeout`, and all stages share one
# budget (TOTAL_BUDGET seconds): a slow stage shrinks the ones after it, so the job always ends
# with its summary instead of being killed from outside.
#
#   bash scripts/gpu_check.sh [OUT_DIR]          (default: $OUT, else ./gpu_out)
#
# OUT_DIR receives a compact artefact set of at most 8 files, what a CI run keeps:
#   summary.txt build.log tests.log sanitizer.log bench_splitkv.csv bench_seqlen.csv
#   bench_seqlen.png extra.tar.gz (junit xml, env details, benchmark logs/JSON, splitkv plot,
#   power samples, full logs where the top-level copies were trimmed).
#
# Environment knobs:
#   BUILD=pip|inplace|skip  pip (default): pip install --no-build-isolation --no-deps -v .
#                           inplace: setup.py build_ext --inplace + PYTHONPATH=python
#                           skip: use what is importable already
#   ARCHS=native|all        native (default): TORCH_CUDA_ARCH_LIST (PYTORCH_ROCM_ARCH on AMD) =
#                           this GPU only (e.g. 9.0a, gfx942), about half the compile time;
#                           all: setup.py's default list. An explicit list always wins.
#   SKIP_TESTS=1 SKIP_SANITIZER=1   skip those stages
#   BENCH=quick|full|none   benchmark mode (default quick)
#   PYTEST_ARGS="..."       extra pytest arguments (e.g. "-k forward -x")
#   TOTAL_BUDGET=580        seconds for the whole script
#   BUILD_TIMEOUT=300 VERIFY_TIMEOUT=240 TESTS_TIMEOUT=240 SANITIZER_TIMEOUT=150
#   BENCH_TIMEOUT=150       stage caps
#   MAX_JOBS=16 PYTHON=python
# Exit code: 0 when every stage that ran passed; 1 otherwise; 2 when no GPU is visible.
set -u
set -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-${OUT:-./gpu_out}}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")   # everything else; packed into extra.tar.gz
cd "$REPO" || exit 1
# Stale results of an earlier run must not pass for this run's.
rm -f "$OUT_DIR"/{summary.txt,build.log,tests.log,sanitizer.log,bench_splitkv.csv,bench_seqlen.csv,bench_seqlen.png,extra.tar.gz}

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif command -v python >/dev/null 2>&1; then PY=python
else PY=python3; fi
export MAX_JOBS=${MAX_JOBS:-16}
BUILD=${BUILD:-pip}
BENCH=${BENCH:-quick}
TOTAL_BUDGET=${TOTAL_BUDGET:-580}
START=$SECONDS
SUMMARY="$OUT_DIR/summary.txt"
STAGE_ROWS=()      # "stage|status|seconds|detail"
DETAIL_LINES=()    # extra lines printed under the table
FAILED=0

log() { echo "[gpu_check $(( SECONDS - START ))s] $*"; }

remaining() { echo $(( TOTAL_BUDGET - (SECONDS - START) )); }

# stage_budget CAP RESERVE: seconds a stage may use, keeping RESERVE for the stages after it.
stage_budget() {
  local cap=$1 reserve=$2 left
  left=$(( $(remaining) - reserve ))
  if [ "$left" -lt "$cap" ]; then echo "$left"; else echo "$cap"; fi
}

add_row() { STAGE_ROWS+=("$1|$2|$3|$4"); }

# Copies a log to OUT_DIR, trimmed to its head and tail when large (the full one goes in the tar).
cap_copy() {
  local src=$1 dst=$2 max_bytes=${3:-1500000}
  [ -f "$src" ] || return 0
  if [ "$(wc -c < "$src")" -le "$max_bytes" ]; then
    cp "$src" "$dst"
  else
    { head -n 1500 "$src"; echo ""; echo "...... trimmed; full log in extra.tar.gz ......"; echo "";
      tail -n 2500 "$src"; } > "$dst"
    cp "$src" "$WORK/full_$(basename "$dst")"
  fi
}

write_summary() {
  {
    echo "==================== flashsplit gpu_check summary ===================="
    echo "device: ${DEVICE_LINE:-unknown}"
    echo "build: BUILD=$BUILD TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-setup default}  total $(( SECONDS - START ))s of ${TOTAL_BUDGET}s"
    printf '%-10s %-8s %6s  %s\n' stage status secs detail
    local row stage status secs detail
    for row in "${STAGE_ROWS[@]}"; do
      IFS='|' read -r stage status secs detail <<< "$row"
      printf '%-10s %-8s %6s  %s\n' "$stage" "$status" "$secs" "$detail"
    done
    if [ "${#DETAIL_LINES[@]}" -gt 0 ]; then printf '%s\n' "${DETAIL_LINES[@]}"; fi
    echo "files: $OUT_DIR/{summary.txt,build.log,tests.log,sanitizer.log,bench_*.csv,bench_seqlen.png,extra.tar.gz}"
    if [ "$FAILED" -eq 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
  } > "$SUMMARY"
}

finish() {
  local code=$1
  write_summary
  cp "$SUMMARY" "$WORK/summary.txt" 2>/dev/null
  tar -czf "$OUT_DIR/extra.tar.gz" -C "$WORK" . 2>/dev/null || log "could not write extra.tar.gz"
  rm -rf "$WORK"
  echo ""
  cat "$SUMMARY"
  exit "$code"
}

# Killed from outside (INT/TERM): still leave a summary of what finished.
trap 'add_row interrupted FAIL $(( SECONDS - START )) "gpu_check got a signal"; FAILED=1; finish 1' INT TERM

# ------------------------------------------------------------------ 1. environment
t0=$SECONDS
ENV_LOG="$WORK/env.txt"
{
  echo "# date: $(date -u +%FT%TZ)  host: $(hostname)  repo: $REPO"
  echo "# git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git -C "$REPO" status --porcelain 2>/dev/null | wc -l) changed paths"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvidia-smi
  else
    echo "nvidia-smi: not found"
  fi
  command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2
  command -v compute-sanitizer >/dev/null 2>&1 && compute-sanitizer --version | tail -n 1
  "$PY" - <<'EOF'
import platform, sys
print("python", sys.version.split()[0], platform.platform())
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
          torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    print("cuda available", torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print("device", p.name, f"cc {p.major}.{p.minor}", p.multi_processor_count, "SMs",
              round(p.total_memory / 2**30, 1), "GiB")
except Exception as exc:
    print("torch import failed:", exc)
for name in ("numpy", "pytest", "triton", "matplotlib", "setuptools", "ninja"):
    try:
        module = __import__(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as exc:
        print(name, "missing:", exc)
EOF
} > "$ENV_LOG" 2>&1
grep -E '^(torch|device|cuda available|python) ' "$ENV_LOG" | sed 's/^/  /'
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
    2>/dev/null | sed 's/^/  nvidia-smi: /'
fi
DEVICE_INFO=$("$PY" -c "
import torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        arch = p.gcnArchName.split(':')[0]
        print(f'amd|{arch}|{p.name} ({arch}, {p.multi_processor_count} CUs), torch {torch.__version__}, ROCm {torch.version.hip}')
    else:
        print(f'nvidia|{p.major}{p.minor}|{p.name} (cc {p.major}.{p.minor}, {p.multi_processor_count} SMs), torch {torch.__version__}, CUDA {torch.version.cuda}')
" 2>/dev/null)
add_row env ok $(( SECONDS - t0 )) "details in extra.tar.gz:env.txt"
if [ -z "$DEVICE_INFO" ]; then
  DEVICE_LINE="no GPU visible to $PY"
  log "no GPU is visible: the build, tests, sanitizer and benchmarks need one; stopping."
  add_row build skipped 0 "no GPU"
  add_row tests skipped 0 "no GPU"
  add_row sanitizer skipped 0 "no GPU"
  add_row bench skipped 0 "no GPU"
  FAILED=1
  finish 2
fi
VENDOR=${DEVICE_INFO%%|*}
DEVICE_ARCH=$(echo "$DEVICE_INFO" | cut -d'|' -f2)
DEVICE_LINE=$(echo "$DEVICE_INFO" | cut -d'|' -f3-)
if [ "$VENDOR" = amd ]; then
  # An AMD GPU: the gfx9 kernels for this target only, unless PYTORCH_ROCM_ARCH says otherwise.
  if [ -z "${PYTORCH_ROCM_ARCH:-}" ] && [ "${ARCHS:-native}" = native ]; then
    export PYTORCH_ROCM_ARCH="$DEVICE_ARCH"
  fi
elif [ -z "${TORCH_CUDA_ARCH_LIST:-}" ] && [ "${ARCHS:-native}" = native ]; then
  # sm_90 needs the "a" variant for wgmma/setmaxnreg; other archs build as plain X.Y.
  DEVICE_CC=$DEVICE_ARCH
  if [ "$DEVICE_CC" = 90 ]; then export TORCH_CUDA_ARCH_LIST="9.0a"
  else export TORCH_CUDA_ARCH_LIST="${DEVICE_CC:0:${#DEVICE_CC}-1}.${DEVICE_CC: -1}"; fi
fi
log "device: $DEVICE_LINE; TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-setup default} PYTORCH_ROCM_ARCH=${PYTORCH_ROCM_ARCH:-setup default}"

# Reserve for the stages still to come, so none of them is starved entirely.
RESERVE_SUMMARY=15
RESERVE_TESTS=$([ "${SKIP_TESTS:-0}" = 1 ] && echo 0 || echo 150)
RESERVE_SANITIZER=$([ "${SKIP_SANITIZER:-0}" = 1 ] && echo 0 || echo 60)
RESERVE_BENCH=$([ "$BENCH" = none ] && echo 0 || echo 90)

# ------------------------------------------------------------------ 2. build
t0=$SECONDS
BUILD_LOG="$WORK/build.log"
budget=$(stage_budget "${BUILD_TIMEOUT:-300}" $(( RESERVE_TESTS + RESERVE_SANITIZER + RESERVE_BENCH + RESERVE_SUMMARY )))
log "build ($BUILD, ${budget}s max, MAX_JOBS=$MAX_JOBS)"
build_rc=0
if [ "$budget" -lt 30 ]; then
  echo "only ${budget}s left of TOTAL_BUDGET=${TOTAL_BUDGET}s for the build" > "$BUILD_LOG"
  BUILD=none
fi
case "$BUILD" in
  none) build_rc=124 ;;
  pip)
    # --force-reinstall: the same version number must not make pip keep a stale build.
    # --no-index / --disable-pip-version-check: a GPU runner may have no network; never wait on it.
    timeout --kill-after=15 "$budget" "$PY" -m pip install --no-build-isolation --no-deps \
        --no-index --disable-pip-version-check --force-reinstall --no-input -v . \
        > "$BUILD_LOG" 2>&1 || build_rc=$? ;;
  inplace)
    timeout --kill-after=15 "$budget" "$PY" setup.py build_ext --inplace > "$BUILD_LOG" 2>&1 \
        || build_rc=$?
    export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}" ;;
  skip)
    echo "BUILD=skip: using the flashsplit that is importable already" > "$BUILD_LOG"
    if [ -d "$REPO/python/flashsplit" ] && ls "$REPO"/python/flashsplit/_C*.so >/dev/null 2>&1; then
      export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}"
    fi ;;
  *)
    echo "unknown BUILD=$BUILD (use pip, inplace or skip)" > "$BUILD_LOG"; build_rc=2 ;;
esac
# The import check runs from outside the repo as well as from it (pytest runs from the repo
# root), so a source tree without _C cannot shadow the installed package unnoticed.
IMPORT_CHECK='import flashsplit, flashsplit._C as C; info = dict(C.build_info()); print("flashsplit", flashsplit.__file__, "build_info", info); assert info["gpu_kernels_built"], "built without GPU kernels"'
if [ "$build_rc" -eq 0 ]; then
  { echo "# import check (repo root)"; "$PY" -c "$IMPORT_CHECK"; } >> "$BUILD_LOG" 2>&1 || build_rc=90
  { echo "# import check (/tmp)"; (cd /tmp && "$PY" -c "$IMPORT_CHECK"); } >> "$BUILD_LOG" 2>&1 || build_rc=91
fi
cap_copy "$BUILD_LOG" "$OUT_DIR/build.log"
if [ "$build_rc" -ne 0 ]; then
  case "$build_rc" in
    124|137) why="timed out after ${budget}s" ;;
    90|91) why="built, but flashsplit._C does not import with GPU kernels (see the end of build.log)" ;;
    *) why="rc=$build_rc" ;;
  esac
  log "build FAILED ($why); last lines of build.log:"
  tail -n 25 "$BUILD_LOG" | cut -c1-300
  add_row build FAIL $(( SECONDS - t0 )) "$why"
  # The first compiler errors say more than pip's closing lines; show both, briefly.
  DETAIL_LINES+=("build.log, first error lines:")
  while IFS= read -r line; do DETAIL_LINES+=("  | ${line:0:200}"); done \
    < <(grep -E '(: error|error:|Error:|FAILED:|fatal|Traceback)' "$BUILD_LOG" | head -n 10)
  DETAIL_LINES+=("build.log, last lines:")
  while IFS= read -r line; do DETAIL_LINES+=("  | ${line:0:200}"); done \
    < <(grep -v '^[[:space:]]*$' "$BUILD_LOG" | tail -n 6)
  FAILED=1
  finish 1
fi
BUILT_FROM=$(grep -m1 '^flashsplit ' "$BUILD_LOG" | cut -c1-160)
add_row build ok $(( SECONDS - t0 )) "${BUILT_FROM:-ok}"
log "build ok: $BUILT_FROM"

# ------------------------------------------------------------------ 3. GPU tests
# run_tests STAGE RESERVE [ENV=VALUE]: the GPU suite once, under the given environment. It runs
# twice: as shipped (the Hopper kernels serve what they can) and with the portable kernels forced.
run_tests() {
  local stage=$1 reserve=$2 env_setting=${3:-}
  local t0=$SECONDS budget tests_rc counts first_line status
  budget=$(stage_budget "${TESTS_TIMEOUT:-240}" "$reserve")
  if [ "$budget" -lt 30 ]; then
    add_row "$stage" skipped 0 "out of time budget (${budget}s left)"; FAILED=1
    return
  fi
  log "$stage (${budget}s max${env_setting:+, $env_setting})"
  local TESTS_LOG="$WORK/$stage.log" JUNIT="$WORK/junit_$stage.xml"
  # SIGINT first: pytest stops cleanly, prints its summary and still writes the junit xml.
  # shellcheck disable=SC2086
  env $env_setting timeout --signal=INT --kill-after=20 "$budget" "$PY" -m pytest -q -m gpu tests \
      -p no:cacheprovider --tb=short -rfE --durations=10 --junitxml="$JUNIT" \
      ${PYTEST_ARGS:-} > "$TESTS_LOG" 2>&1
  tests_rc=$?
  # The first run's log is a top-level artefact; the other goes in extra.tar.gz.
  if [ "$stage" = tests ]; then cap_copy "$TESTS_LOG" "$OUT_DIR/tests.log"; fi
  counts=$("$PY" - "$JUNIT" <<'EOF' 2>/dev/null
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
print(f"{passed} passed, {n['failures']} failed, {n['errors']} errors, {n['skipped']} skipped")
shown = 0
for case in root.iter("testcase"):
    for tag in ("failure", "error"):
        node = case.find(tag)
        if node is not None and shown < 12:
            message = " ".join((node.get("message") or "").split())[:150]
            print(f"  {tag.upper()}: {case.get('classname', '')}::{case.get('name', '')} - {message}")
            shown += 1
skips = {}
for case in root.iter("testcase"):
    node = case.find("skipped")
    if node is not None:
        reason = " ".join((node.get("message") or "").split())[:100]
        skips[reason] = skips.get(reason, 0) + 1
for reason, count in sorted(skips.items(), key=lambda kv: -kv[1])[:4]:
    print(f"  skipped x{count}: {reason}")
EOF
)
  if [ -z "$counts" ]; then counts="no junit xml ($(tail -n 1 "$TESTS_LOG" | cut -c1-150))"; fi
  first_line=$(echo "$counts" | head -n 1)
  case "$tests_rc" in
    0) status=ok ;;
    124|137|130) status=TIMEOUT; first_line="$first_line (stopped at ${budget}s)" ;;
    5) status=FAIL; first_line="no gpu tests collected: $first_line" ;;
    *) status=FAIL ;;
  esac
  [ "$status" = ok ] || FAILED=1
  add_row "$stage" "$status" $(( SECONDS - t0 )) "$first_line"
  while IFS= read -r line; do DETAIL_LINES+=("$line"); done < <(echo "$counts" | tail -n +2)
  log "$stage $status: $first_line"
}

# ------------------------------------------------------------------ verify
# python -m flashsplit.verify: the correctness matrix against the reference on this GPU; on a
# pass it admits the GPU (a stamp in the cache folder), which the GPU tests of a GPU outside the
# tested table (every AMD target) need.
t0=$SECONDS
VERIFY_LOG="$WORK/verify.log"
log "verify"
timeout --kill-after=15 "${VERIFY_TIMEOUT:-240}" "$PY" -m flashsplit.verify > "$VERIFY_LOG" 2>&1
verify_rc=$?
if [ "$verify_rc" -eq 0 ]; then status=PASS; else status=FAIL; FAILED=1; fi
add_row verify "$status" $(( SECONDS - t0 )) "$(tail -n 1 "$VERIFY_LOG" | cut -c1-150)"
while IFS= read -r line; do DETAIL_LINES+=("  verify | $line"); done \
  < <(grep -E '^(dtype|bf16|fp16|FAILED)' "$VERIFY_LOG" | head -n 20)

if [ "${SKIP_TESTS:-0}" = 1 ]; then
  add_row tests skipped 0 "SKIP_TESTS=1"
else
  # RESERVE_TESTS covers both runs: the first keeps half of it for the second.
  run_tests tests $(( RESERVE_TESTS / 2 + RESERVE_SANITIZER + RESERVE_BENCH + RESERVE_SUMMARY ))
  if [ "$VENDOR" = nvidia ]; then
    run_tests tests-portable $(( RESERVE_SANITIZER + RESERVE_BENCH + RESERVE_SUMMARY )) \
      FLASHSPLIT_DISABLE_HOPPER=1
  else
    add_row tests-portable skipped 0 "one kernel family on AMD (the Hopper switch is NVIDIA's)"
  fi
fi

# ------------------------------------------------------------------ 4. sanitizer
if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
  add_row sanitizer skipped 0 "SKIP_SANITIZER=1"
elif [ "$VENDOR" != nvidia ]; then
  add_row sanitizer skipped 0 "compute-sanitizer is NVIDIA's; nothing of its kind runs here"
else
  t0=$SECONDS
  budget=$(stage_budget "${SANITIZER_TIMEOUT:-150}" $(( RESERVE_BENCH + RESERVE_SUMMARY )))
  if [ "$budget" -lt 30 ]; then
    add_row sanitizer skipped 0 "out of time budget (${budget}s left)"; FAILED=1
  else
    log "sanitizer (${budget}s max)"
    # memcheck gets two thirds, racecheck the rest (it checks one tiny case).
    MEMCHECK_TIMEOUT=$(( budget * 2 / 3 )) RACECHECK_TIMEOUT=$(( budget - budget * 2 / 3 - 5 )) \
      bash "$REPO/scripts/sanitize.sh" "$WORK/sanitize" > "$WORK/sanitize_stdout.txt" 2>&1
    san_rc=$?
    cap_copy "$WORK/sanitize/sanitizer.log" "$OUT_DIR/sanitizer.log"
    if [ ! -f "$OUT_DIR/sanitizer.log" ]; then cp "$WORK/sanitize_stdout.txt" "$OUT_DIR/sanitizer.log"; fi
    verdict=$(grep -E '^sanitize (memcheck|racecheck|initcheck|synccheck):' "$WORK/sanitize_stdout.txt" \
              | sed 's/^sanitize //' | cut -c1-110 | awk 'NR > 1 {printf " | "} {printf "%s", $0}')
    if [ "$san_rc" -eq 0 ]; then status=PASS; else status=FAIL; FAILED=1; fi
    add_row sanitizer "$status" $(( SECONDS - t0 )) "${verdict:-$(tail -n 1 "$WORK/sanitize_stdout.txt")}"
    log "sanitizer $status"
  fi
fi

# ------------------------------------------------------------------ 5. benchmarks
if [ "$BENCH" = none ]; then
  add_row bench skipped 0 "BENCH=none"
else
  t0=$SECONDS
  budget=$(stage_budget "${BENCH_TIMEOUT:-150}" "$RESERVE_SUMMARY")
  if [ "$budget" -lt 30 ]; then
    add_row bench skipped 0 "out of time budget (${budget}s left)"
  else
    mode_flag=$([ "$BENCH" = full ] && echo "" || echo "--quick")
    BENCH_DIR="$WORK/bench"
    mkdir -p "$BENCH_DIR"
    half=$(( budget / 2 ))
    # The board's power state while the benchmarks run (on an H100 every bench_seqlen point runs
    # at the power limit: docs/performance.md), summarised beside their tables.
    POWER_PID=""
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi --query-gpu=clocks.sm,power.draw,enforced.power.limit,clocks_throttle_reasons.active \
          --format=csv,noheader,nounits -lms 200 > "$WORK/gpu_power.csv" 2>/dev/null &
      POWER_PID=$!
    fi
    log "bench_splitkv ($BENCH, ${half}s max)"
    # shellcheck disable=SC2086
    timeout --signal=INT --kill-after=15 "$half" "$PY" benchmarks/bench_splitkv.py $mode_flag \
        --out "$BENCH_DIR" > "$WORK/bench_splitkv.log" 2>&1
    kv_rc=$?
    left=$(stage_budget $(( budget - (SECONDS - t0) )) "$RESERVE_SUMMARY")
    if [ "$left" -ge 15 ]; then
      log "bench_seqlen ($BENCH, ${left}s max)"
      # shellcheck disable=SC2086
      timeout --signal=INT --kill-after=15 "$left" "$PY" benchmarks/bench_seqlen.py $mode_flag \
          --out "$BENCH_DIR" > "$WORK/bench_seqlen.log" 2>&1
      sl_rc=$?
    else
      echo "bench_seqlen not run: ${left}s left" > "$WORK/bench_seqlen.log"
      sl_rc=124
    fi
    for f in bench_splitkv.csv bench_seqlen.csv bench_seqlen.png; do
      [ -f "$BENCH_DIR/$f" ] && cp "$BENCH_DIR/$f" "$OUT_DIR/$f"
    done
    if [ -n "$POWER_PID" ]; then
      kill "$POWER_PID" 2>/dev/null
      wait "$POWER_PID" 2>/dev/null
      DETAIL_LINES+=("$("$PY" benchmarks/power_summary.py "$WORK/gpu_power.csv" 2>&1 | head -n 1)")
    fi
    status=ok
    detail="splitkv rc=$kv_rc, seqlen rc=$sl_rc"
    # 124 = stopped by its time limit: the rows measured so far were still written (partial).
    if { [ "$kv_rc" -ne 0 ] && [ "$kv_rc" -ne 124 ]; } || { [ "$sl_rc" -ne 0 ] && [ "$sl_rc" -ne 124 ]; }; then
      status=FAIL; FAILED=1
    elif [ "$kv_rc" -eq 124 ] || [ "$sl_rc" -eq 124 ]; then
      status=partial; detail="$detail (124 = cut by the time budget; partial results kept)"
    fi
    if [ "$status" != ok ]; then
      for name in splitkv seqlen; do
        while IFS= read -r line; do DETAIL_LINES+=("  bench_$name: ${line:0:200}"); done \
          < <(tail -n 3 "$WORK/bench_$name.log")
      done
    fi
    add_row bench "$status" $(( SECONDS - t0 )) "$detail"
    for name in splitkv seqlen; do
      if [ -f "$BENCH_DIR/bench_${name}_summary.txt" ]; then
        while IFS= read -r line; do DETAIL_LINES+=("${line:0:230}"); done < "$BENCH_DIR/bench_${name}_summary.txt"
      fi
    done
    log "bench $status"
  fi
fi

finish "$FAILED"
