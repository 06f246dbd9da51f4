"""``treadle sim`` and ``treadle validate`` on the Google 2011 and 2019 samples that ship
in the repository (``tests/data/google2011``, ``tests/data/google2019``): each run to
completion from the checkout, through the command line as a user types it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.treadle_cli import treadle

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize(
    ("sample", "policy"),
    [
        ("google2011", "fifo"),
        ("google2019/instance_events.csv", "fair"),
        ("google2019/instance_events.jsonl", "drf"),
    ],
)
def test_sim_runs_the_sample_to_completion(tmp_path: Path, sample: str, policy: str) -> None:
    proc = treadle("sim", f"tests/data/{sample}", "--policy", policy, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["finished"] == summary["jobs"] == 3  # jobs 101, 103 and 106
    assert "3/3 jobs" in proc.stdout


def test_validate_counts_the_sample_directory() -> None:
    proc = treadle("validate", "tests/data/google2011")
    assert proc.returncode == 0, proc.stderr
    assert "12500 nodes" in proc.stdout
    assert "3 jobs, 6 tasks" in proc.stdout


def test_a_malformed_row_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "part-00000-of-00001.csv"
    bad.write_text("600000000,,1,0,,0,u,1,2,0.1,0.1,0,0\n600000000,,1,zero,,1,u,1,2,0.1,0.1,0,0\n")
    proc = treadle("validate", str(bad), "--format", "google2011")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"error: {bad}: line 2.task_index: expected a number, got 'zero'"
    )


@pytest.mark.parametrize("sample", ["google2011", "google2019/instance_events.csv"])
def test_what_an_importer_left_out_is_noted_on_stderr_and_stdout_is_the_answer(
    tmp_path: Path, sample: str
) -> None:
    """``validate`` and ``convert`` (no --log-level): stdout holds only the command's
    answer, one line a script can read; the importer's notes (its jobs left out) are log
    records on stderr."""
    converted = tmp_path / "w.yaml"
    for args in (["validate", f"tests/data/{sample}"],
                 ["convert", f"tests/data/{sample}", "--to", str(converted)]):  # fmt: skip
        proc = treadle(*args)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        assert "3 jobs, 6 tasks" in line
        notes = [json.loads(r) for r in proc.stderr.splitlines()]
        assert {n["event"] for n in notes} == {"left out"}
        assert "1 jobs begun before the trace" in {n["what"] for n in notes}
