"""``treadle compare --workers N``: policies simulated in worker processes write the same
files as one after another, and a failing or dying worker is one line naming its policy."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from test_cli import one_line_error, treadle

from treadle.errors import TreadleError
from treadle.study.compare import RunResult, SimBackend, compare
from treadle.study.runner import PolicyChoice, RunOptions
from treadle.workload import load_workload

POLICIES = ["sjf", "fifo", "drf", "fair"]  # not alphabetical, and fifo not first


def _files(root: Path) -> dict[str, bytes]:
    """Every result file under ``root`` but the plots (bytes by relative path)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".png"
    }


def test_workers_write_the_same_files_as_a_sequential_compare(tmp_path: Path) -> None:
    outs = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        proc = treadle(
            "compare", "demo", "--policies", ",".join(POLICIES), "--set", "drf.across=jobs",
            "--workers", workers, "--out", str(out),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        # Not a terminal: one line per finished run, each naming its policy.
        done = [line.split(":")[0] for line in proc.stderr.splitlines() if " jobs, " in line]
        assert sorted(done) == sorted(POLICIES), proc.stderr
        outs[workers] = _files(out)
    sequential, parallel = outs["1"], outs["2"]
    per_policy = {
        f"{p}/{f}" for p in POLICIES for f in ("summary.json", "jobs.csv", "events.parquet")
    }
    assert per_policy | {"report.md", "comparison.json"} <= set(sequential)
    assert set(sequential) == set(parallel)
    different = [name for name in sequential if sequential[name] != parallel[name]]
    assert not different
    assert set(json.loads(sequential["comparison.json"])) == set(POLICIES)  # sorted keys
    # The report's table: the command line's order, not the order the runs finished in.
    report = sequential["report.md"].decode()
    rows = [line.split("|")[1].strip() for line in report.splitlines() if line.startswith("| ")]
    assert [r for r in rows if r in POLICIES][: len(POLICIES)] == POLICIES


def test_library_compare_in_workers_returns_light_results_in_order(tmp_path: Path) -> None:
    wl = load_workload("tiny")
    choices = [PolicyChoice(n, {}) for n in ("drf", "fifo", "fair")]
    finished: list[str] = []
    seq = compare(wl, choices, tmp_path / "a", SimBackend(), workers=1)
    par = compare(
        wl, choices, tmp_path / "b", SimBackend(), workers=3,
        on_finished=lambda n, result, run: finished.append(n),
    )  # fmt: skip
    assert sorted(finished) == ["drf", "fair", "fifo"]
    assert list(par.results) == list(par.runs) == ["drf", "fifo", "fair"]
    for name in par.results:
        a, b = seq.results[name], par.results[name]
        assert isinstance(b, RunResult)
        assert b.finished == b.jobs == len(wl.jobs)
        assert (a.jobs, a.finished, a.end_s, a.stalled, a.stats) == (
            b.jobs,
            b.finished,
            b.end_s,
            b.stalled,
            b.stats,
        )
        assert seq.runs[name].summary == par.runs[name].summary
        assert b.records()[0]["event"] == "run_started"  # read back from disk


class FailingBackend(SimBackend):
    """Raises inside the worker for one policy."""

    def run(self, workload: Any, choice: PolicyChoice, *args: Any) -> Any:
        if choice.name == "drf":
            raise ValueError("boom")
        return super().run(workload, choice, *args)


class DyingBackend(SimBackend):
    """Its worker process is killed while running one policy."""

    def run(self, workload: Any, choice: PolicyChoice, *args: Any) -> Any:
        if choice.name == "drf":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(workload, choice, *args)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("backend", "message"),
    [
        (FailingBackend(), "policy drf: ValueError: boom"),
        (DyingBackend(), "policy drf: its worker process died (killed by SIGKILL)"),
    ],
)
def test_a_failing_worker_is_one_error_naming_its_policy(
    tmp_path: Path, backend: SimBackend, message: str
) -> None:
    wl = load_workload("tiny")
    choices = [PolicyChoice(n, {}) for n in ("fifo", "drf", "fair")]
    with pytest.raises(TreadleError) as caught:
        compare(wl, choices, tmp_path, backend, options=RunOptions(slowdown=False), workers=2)
    assert str(caught.value).startswith(message), caught.value
    assert not (tmp_path / "report.md").exists()


def test_workers_must_be_at_least_one(tmp_path: Path) -> None:
    line = one_line_error(
        treadle("compare", "tiny", "--workers", "0", "--out", str(tmp_path / "c"))
    )
    assert line == "error: --workers must be >= 1, got 0"
    assert not (tmp_path / "c").exists()


def test_a_bad_parameter_fails_before_any_worker_starts(tmp_path: Path) -> None:
    proc = treadle(
        "compare", "tiny", "--policies", "fifo,drf", "--set", "drf.across=nosuch",
        "--workers", "2", "--out", str(tmp_path / "c"),
    )  # fmt: skip
    line = one_line_error(proc)
    assert "across" in line
    assert not (tmp_path / "c").exists()
