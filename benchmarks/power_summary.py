"""Summarises the GPU's power state while the benchmarks ran, from nvidia-smi samples.

On an H100 every bench_seqlen point runs at the board's 700 W limit, with the software power cap
lowering the SM clock for flashsplit and its peers alike (docs/performance.md). Timings taken
there depend on the clock the power controller allows, which ncu (it locks clocks) does not
show, so scripts/gpu_check.sh samples the board during the benchmarks and prints this one-line
summary beside their tables.

Input: lines of `nvidia-smi --query-gpu=clocks.sm,power.draw,enforced.power.limit,
clocks_throttle_reasons.active --format=csv,noheader,nounits`; samples whose fields are not
numbers ("[N/A]", a header) are skipped.

    python benchmarks/power_summary.py SAMPLES.csv
"""

from __future__ import annotations

import statistics
import sys
from typing import Iterable, List, NamedTuple, Optional

# nvidia-smi's clock event reasons (nvmlClocksEventReasons): the bits that mean "slowed down".
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80


class Sample(NamedTuple):
    sm_mhz: float
    power_w: float
    limit_w: float
    reasons: int


def parse_sample(line: str) -> Optional[Sample]:
    """One CSV line -> Sample, or None where a field is missing or not a number."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 4:
        return None
    try:
        return Sample(float(fields[0]), float(fields[1]), float(fields[2]), int(fields[3], 16))
    except ValueError:
        return None


# Samples drawing at least this share of the limit count as "under load": the benchmarks'
# timed calls, not the setup between them (which the 200 ms samples also catch).
LOAD_SHARE = 0.85


def summarize(lines: Iterable[str]) -> str:
    samples: List[Sample] = [s for s in map(parse_sample, lines) if s is not None]
    if not samples:
        return "gpu power: no usable nvidia-smi samples"
    limit = samples[-1].limit_w
    loaded = [s for s in samples if s.power_w >= LOAD_SHARE * limit]
    text = (f"gpu power: {len(samples)} samples, max {max(s.power_w for s in samples):.0f} W of "
            f"a {limit:.0f} W limit; ")
    if not loaded:
        return text + f"none at {100 * LOAD_SHARE:.0f}% of the limit or more"
    clocks = [s.sm_mhz for s in loaded]
    capped = sum(1 for s in loaded if s.reasons & REASON_SW_POWER_CAP)
    other = sum(1 for s in loaded
                if s.reasons & (REASON_HW_SLOWDOWN | REASON_SW_THERMAL | REASON_HW_THERMAL
                                | REASON_HW_POWER_BRAKE))
    return text + (f"{len(loaded)} at {100 * LOAD_SHARE:.0f}% of it or more, where the SM clock "
                   f"was {statistics.median(clocks):.0f} MHz median ({min(clocks):.0f}-"
                   f"{max(clocks):.0f}), the software power cap slowed it in "
                   f"{100.0 * capped / len(loaded):.0f}% and thermal or hardware limits in "
                   f"{100.0 * other / len(loaded):.0f}%")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python benchmarks/power_summary.py SAMPLES.csv", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8", errors="replace") as f:
        print(summarize(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
