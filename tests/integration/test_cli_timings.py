"""``treadle sim --timings`` says on stderr where the wall and CPU time went, as one JSON
line whose phases add up from the process's start, and leaves the run's files as they are
without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TREADLE = [sys.executable, "-m", "treadle.cli"]


def test_timings_name_every_phase_and_change_no_output(tmp_path: Path) -> None:
    def sim(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [*TREADLE, "sim", "demo", "--policy", "fifo", "--out", str(out), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc

    timed = sim(tmp_path / "timed", "--timings")
    lines = [x for x in timed.stderr.splitlines() if x.startswith("timings: ")]
    assert len(lines) == 1
    report = json.loads(lines[0].removeprefix("timings: "))
    phases = ("setup", "load", "alone", "simulate", "metrics", "write", "other")
    for phase in (*phases, "total", "peak_rss_mb"):
        assert report[phase] >= 0
    assert set(report["cpu"]) == set(phases)
    # The phases add up: from the process's start to the report, nothing unaccounted.
    assert abs(sum(report[p] for p in phases) - report["total"]) < 1e-5
    assert report["setup"] > 0  # the interpreter's start, the imports
    assert report["cpu"]["setup"] > 0
    plain = sim(tmp_path / "plain")
    assert "timings" not in plain.stderr
    for name in ("summary.json", "jobs.csv"):
        assert (tmp_path / "timed" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes()
