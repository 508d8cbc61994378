"""benchmarks/power_summary.py: the one-line power summary gpu_check.sh prints beside benchmarks."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "power_summary.py")
_spec = importlib.util.spec_from_file_location("power_summary", _PATH)
power_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(power_summary)


def test_parse_sample_reads_fields_and_hex_reasons():
    s = power_summary.parse_sample("1650, 681.5, 700.00, 0x0000000000000004\n")
    assert s == power_summary.Sample(1650.0, 681.5, 700.0, 4)


@pytest.mark.parametrize("line", ["", "clocks.sm [MHz], power.draw [W], x, y",
                                  "1650, [N/A], 700.00, 0x0", "1650, 600, 700"])
def test_parse_sample_skips_unusable_lines(line):
    assert power_summary.parse_sample(line) is None


def test_summary_describes_the_samples_under_load():
    # 650 W is 93% of the limit (under load); 300 W (setup between calls) is not.
    lines = ["1500, 690, 700, 0x4", "1800, 650, 700, 0x0", "1400, 700, 700, 0x44",
             "garbage", "1980, 300, 700, 0x0", "1700, 680, 700, 0x0000000000000004"]
    text = power_summary.summarize(lines)
    assert text.startswith("gpu power: 5 samples, max 700 W of a 700 W limit; "
                           "4 at 85% of it or more")
    assert "SM clock was 1600 MHz median (1400-1800)" in text
    assert "power cap slowed it in 75%" in text
    assert "thermal or hardware limits in 25%" in text


def test_summary_without_load_or_samples_says_so():
    assert power_summary.summarize(["[N/A]"]) == "gpu power: no usable nvidia-smi samples"
    assert power_summary.summarize(["1980, 100, 700, 0x0"]).endswith(
        "none at 85% of the limit or more")


def test_main_reads_a_file(tmp_path, capsys):
    path = tmp_path / "samples.csv"
    path.write_text("1600, 700, 700, 0x4\n")
    assert power_summary.main([str(path)]) == 0
    assert "1 samples" in capsys.readouterr().out
    assert power_summary.main([]) == 2
