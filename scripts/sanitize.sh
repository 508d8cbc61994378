#!/usr/bin/env bash
# Runs scripts/sanitize_cases.py under NVIDIA compute-sanitizer: memcheck over the small case
# set, racecheck over one small split case. Exits non-zero on any sanitizer error, any case that
# computes a wrong answer, or a tool that ran out of time (inconclusive is not clean).
#
#   bash scripts/sanitize.sh [LOG_DIR]        (default: $OUT/sanitize, else ./sanitize_out)
#
# Writes one log, LOG_DIR/sanitizer.log (every tool's full output, in order), and prints one
# status line per tool, then "sanitize: PASS" or "sanitize: FAIL", last.
#
# Environment:
#   PYTHON                  interpreter (default: python)
#   COMPUTE_SANITIZER       path to compute-sanitizer (default: PATH, then /usr/local/cuda*/bin)
#   SANITIZER_TOOLS         tools to run, in order (default "memcheck racecheck"; initcheck and
#                           synccheck are accepted too and use the memcheck case set)
#   MEMCHECK_TIMEOUT        seconds for the memcheck run (default 150)
#   RACECHECK_TIMEOUT       seconds for the racecheck run (default 90); other tools: 120
#   SANITIZER_PADDING       bytes of padding memcheck puts after each allocation (default: off)
#   SANITIZER_KERNEL_FILTER passed as --kernel-name (e.g. "kns=flashsplit") to check only those
set -u
set -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_DIR=${1:-${OUT:+$OUT/sanitize}}
LOG_DIR=${LOG_DIR:-./sanitize_out}
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/sanitizer.log"
: > "$LOG"
PY=${PYTHON:-python}
TOOLS=${SANITIZER_TOOLS:-memcheck racecheck}

find_sanitizer() {
  if [ -n "${COMPUTE_SANITIZER:-}" ]; then echo "$COMPUTE_SANITIZER"; return; fi
  if command -v compute-sanitizer >/dev/null 2>&1; then command -v compute-sanitizer; return; fi
  local candidate
  for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
                   /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    if [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
}

CS=$(find_sanitizer)
if [ -z "$CS" ]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/it)" | tee -a "$LOG"
  echo "sanitize: FAIL"
  exit 3
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "sanitize: no CUDA device is visible; nothing to sanitize" | tee -a "$LOG"
  echo "sanitize: FAIL"
  exit 2
fi

# One cudaMalloc per tensor: with torch's caching allocator, an out-of-bounds access inside a
# pooled segment hits another tensor's memory and memcheck cannot see it.
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
{
  echo "# compute-sanitizer: $CS"
  "$CS" --version 2>&1 | tail -n 2
  echo "# PYTORCH_NO_CUDA_MEMORY_CACHING=1, tools: $TOOLS"
} >> "$LOG"

overall=0
STATUS_LINES=()

run_tool() {
  local tool=$1 seconds cases_args extra=()
  case "$tool" in
    memcheck)  seconds=${MEMCHECK_TIMEOUT:-150}; cases_args=(--set memcheck)
               if [ -n "${SANITIZER_PADDING:-}" ]; then extra+=(--padding "$SANITIZER_PADDING"); fi ;;
    racecheck) seconds=${RACECHECK_TIMEOUT:-90}; cases_args=(--set race --no-reference)
               extra+=(--racecheck-report all) ;;
    initcheck|synccheck) seconds=120; cases_args=(--set memcheck) ;;
    *) echo "sanitize: unknown tool '$tool'" | tee -a "$LOG"; overall=1
       STATUS_LINES+=("$tool: unknown tool"); return ;;
  esac
  if [ -n "${SANITIZER_KERNEL_FILTER:-}" ]; then extra+=(--kernel-name "$SANITIZER_KERNEL_FILTER"); fi
  local section
  section=$(mktemp)
  echo "" >> "$LOG"
  echo "################ $tool (timeout ${seconds}s): ${cases_args[*]}" >> "$LOG"
  local began=$SECONDS rc
  # --error-exitcode 99 tells sanitizer findings apart from a case failing its own check (1).
  timeout --kill-after=10 "$seconds" "$CS" --tool "$tool" --error-exitcode 99 --print-limit 30 \
      ${extra[@]+"${extra[@]}"} "$PY" "$REPO/scripts/sanitize_cases.py" "${cases_args[@]}" > "$section" 2>&1
  rc=$?
  cat "$section" >> "$LOG"
  local errors
  # memcheck & co: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards
  # displayed (N errors, W warnings)". The largest N found is reported.
  errors=$( { grep -Eo 'ERROR SUMMARY: [0-9]+' "$section";
              grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+' "$section"; } \
           | grep -Eo '[0-9]+$' | awk 'BEGIN {m = 0} {if ($1 > m) m = $1} END {print m}')
  local cases_line
  cases_line=$(grep -E '^sanitize_cases: ' "$section" | tail -n 1)
  local verdict
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="TIMEOUT after ${seconds}s (inconclusive)"
  elif [ "$rc" -eq 99 ] || [ "${errors:-0}" -gt 0 ]; then
    local first
    first=$(grep -m1 -E '^========= +(Invalid|Race|Error|Uninitialized|Barrier|Program hit|Warning)' \
            "$section" | cut -c1-120)
    verdict="ERRORS: $errors reported (first: ${first:--})"
  elif [ "$rc" -eq 0 ]; then
    verdict="clean (0 errors)"
  else
    verdict="FAILED rc=$rc ($(tail -n 3 "$section" | tr '\n' ' ' | cut -c1-160))"
  fi
  [ "$rc" -eq 0 ] && [ "${errors:-0}" -eq 0 ] || overall=1
  STATUS_LINES+=("$tool: $verdict; ${cases_line:-no case summary}; $((SECONDS - began))s")
  rm -f "$section"
}

for tool in $TOOLS; do
  run_tool "$tool"
done

{
  echo ""
  echo "################ summary"
  printf '%s\n' "${STATUS_LINES[@]}"
} >> "$LOG"
printf 'sanitize %s\n' "${STATUS_LINES[@]}"
echo "sanitize: log in $LOG"
if [ "$overall" -eq 0 ]; then echo "sanitize: PASS"; else echo "sanitize: FAIL"; fi
exit "$overall"
