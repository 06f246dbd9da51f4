"""The memory benchmark's live case runs a real RM through rounds of submitted and killed
applications and prints its RSS before and after, with their ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_live_case_prints_the_rms_rss_after_the_first_and_last_rounds() -> None:
    argv = [sys.executable, "-m", "tests.benchmarks", "memory", "--scales", ""]
    argv += ["--live-cycles", "3", "--live-tasks", "50", "--live-first", "1"]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    line = out.stdout.strip().splitlines()[-1]
    m = re.fullmatch(
        r"live RM \(3 applications of 50 tasks submitted and killed\): RSS after 1 "
        r"([\d.]+) MB, after 3 ([\d.]+) MB, ([\d.]+)x",
        line,
    )
    assert m, line
    a, b, ratio = map(float, m.groups())
    assert 20 < a < 1000
    assert 20 < b < 1000
    assert abs(b / a - ratio) < 0.01


def test_a_live_first_round_past_the_last_is_refused() -> None:
    argv = [sys.executable, "-m", "tests.benchmarks", "memory", "--scales", ""]
    argv += ["--live-cycles", "3", "--live-first", "3"]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "--live-first must be at least 1 and below --live-cycles" in out.stderr
