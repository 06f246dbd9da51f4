"""``treadle study``: a bad spec runs nothing; a study killed with SIGKILL mid-way and run
again runs only its missing runs and ends with the same bytes as an uninterrupted one;
local workers and a Dask cluster give the same tables; the must-show shape (every policy
x 5 phase seeds on the demo workload) has n = 5 and a CI in every cell."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_cli import one_line_error, treadle

from treadle.study import run as run_study
from treadle.study.tables import JOBS_PARQUET, RUNS_PARQUET

OUTPUTS = (RUNS_PARQUET, JOBS_PARQUET, "report.md", "report.html")
SMALL = "workloads: [demo]\npolicies: [fifo, drf, sjf, tetris]\nreplications: 4\n"

BAD_SPECS = [
    ("bad key", "replicatoins: 3\n", "replicatoins: unknown field"),
    ("unknown policy", "policies: [fifo, dfr]\n", "policies[1]: unknown policy 'dfr'"),
    ("out of range", "set: {uwfq.grace_resource_s: [1, -1]}\n", "[1]: policy 'uwfq'"),
    ("no such parameter", "set: {drf.grace: [1, 2]}\n", "unknown parameter"),
]


def _spec(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("what", "line", "says"), BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_a_bad_spec_is_one_line_exit_2_and_runs_nothing(
    tmp_path: Path, what: str, line: str, says: str
) -> None:
    policies = "" if line.startswith("policies") else "policies: [fifo, drf, uwfq]\n"
    spec = _spec(tmp_path, "workloads: [tiny]\n" + policies + line)
    proc = treadle("study", str(spec), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    error = one_line_error(proc)
    assert error.startswith(f"error: {spec}: ")
    assert says in error
    assert not (tmp_path / "out").exists()


def _bytes(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def _complete_runs(out: Path) -> int:
    return len([p for p in (out / "runs").glob("*") if (p / "unit.json").is_file()])


@pytest.mark.slow
def test_a_killed_study_runs_only_its_missing_runs_and_ends_identical(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SMALL)
    whole = treadle("study", str(spec), "--out", str(tmp_path / "whole"), "--workers", "1")
    assert whole.returncode == 0, whole.stderr
    assert "study: 16 runs, 0 already done, running 16 with 1 worker" in whole.stderr
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "treadle.cli", "study", str(spec), "--out", str(out)]
    proc = subprocess.Popen([*command, "--workers", "2"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out.exists() and _complete_runs(out) >= 3):
        assert proc.poll() is None, "the study ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the study and its workers, mid-way
    proc.wait()
    done = _complete_runs(out)
    assert 3 <= done < 16
    assert not (out / RUNS_PARQUET).exists()
    again = treadle("study", str(spec), "--out", str(out), "--workers", "2")
    assert again.returncode == 0, again.stderr
    assert f"study: 16 runs, {done} already done, running {16 - done} with 2 workers" in (
        again.stderr
    )
    assert len(re.findall(r"^\[\d+/16\]", again.stderr, re.M)) == 16 - done
    assert _bytes(out) == _bytes(tmp_path / "whole")  # workers 2, resumed: the same bytes
    assert [p.name for p in (out / "runs").iterdir() if p.name.startswith(".")] == []
    third = treadle("study", str(spec), "--out", str(out))
    assert "16 already done, running 0" in third.stderr
    fresh = treadle("study", str(spec), "--out", str(out), "--no-resume", "--workers", "1")
    assert "0 already done, running 16" in fresh.stderr
    assert _bytes(out) == _bytes(tmp_path / "whole")


def test_another_spec_in_a_study_directory_is_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "workloads: [tiny]\npolicies: [fifo]\n")
    assert treadle("study", str(spec), "--out", str(tmp_path / "out")).returncode == 0
    other = _spec(tmp_path, "workloads: [tiny]\npolicies: [drf]\n", "other.yaml")
    proc = treadle("study", str(other), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "holds another study" in one_line_error(proc)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("mine")
    proc = treadle("study", str(spec), "--out", str(tmp_path / "plain"))
    line = one_line_error(proc)
    assert line.startswith("error: --out: ")
    assert "is not a study directory" in line
    assert "--force" in line
    # --force makes the directory this study's; what was there stays.
    proc = treadle("study", str(other), "--out", str(tmp_path / "out"), "--force")
    assert proc.returncode == 0, proc.stderr
    assert "drf" in (tmp_path / "out" / "report.md").read_text()
    proc = treadle("study", str(spec), "--out", str(tmp_path / "plain"), "--force")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "plain" / "notes.txt").read_text() == "mine"


def test_compare_seeds_writes_the_study_of_its_policies(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = treadle("compare", "tiny", "--policies", "fifo,drf", "--seeds", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    runs = pq.read_table(out / RUNS_PARQUET).to_pydict()
    assert runs["config"] == ["fifo"] * 3 + ["drf"] * 3
    assert runs["phase_seed"] == [0, 1, 2, 0, 1, 2]
    assert "Ratio of means against fifo" in (out / "report.md").read_text()


def test_compare_seeds_passes_the_scaling_flags_to_its_study(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = treadle("compare", "tiny", "--policies", "fifo,drf", "--seeds", "2", "--nodes", "2",
                   "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    runs = pq.read_table(out / RUNS_PARQUET).to_pydict()
    assert runs["config"] == ["fifo"] * 2 + ["drf"] * 2
    summary = json.loads(next((out / "runs").glob("*/summary.json")).read_text())
    assert summary["parameters"]["workload"]["scaling"]["nodes"] == 2


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_dask_cluster_gives_the_tables_of_local_workers(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec = {"workloads": ["tiny"], "policies": ["fifo", "drf", "sjf"], "replications": 3}
    local = run_study(spec, tmp_path / "local", workers=2)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        remote = run_study(spec, tmp_path / "dask", cluster=cluster.scheduler_address)
    assert (local.runs, local.executed, remote.executed) == (9, 9, 9)
    assert _bytes(tmp_path / "local") == _bytes(tmp_path / "dask")


@pytest.mark.slow
def test_every_policy_on_five_phase_seeds_has_n_5_and_cis(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "workloads: [demo]\npolicies: all\nbaseline: fifo\nreplications: 5\n")
    proc = treadle("study", str(spec), "--out", str(tmp_path / "out"), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    runs = pq.read_table(tmp_path / "out" / RUNS_PARQUET)
    assert runs.num_rows == 14 * 5
    jobs = pq.read_table(tmp_path / "out" / JOBS_PARQUET)
    assert jobs.num_rows == 14 * 5 * 20
    assert {"key", "config", "user", "queue", "jct_s", "slowdown", "wait_s"} <= set(
        jobs.column_names
    )
    text = (tmp_path / "out" / "report.md").read_text()
    means = text.split("### Mean per config")[1].split("###")[0]
    rows = [r for r in means.splitlines() if r.startswith("| ") and not r.startswith("| config")]
    assert len(rows) == 14
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == "5", row
        assert all(re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\]", c) for c in cells[2:]), row
    pairs = text.split("### Ratio of means against fifo")[1].split("##")[0]
    pair_rows = [r for r in pairs.splitlines() if r.startswith("| ") and "n pairs" not in r]
    assert len(pair_rows) == 13
    assert all(" 5 |" in r and "p=" in r for r in pair_rows)
    assert (tmp_path / "out" / "replications" / "0-demo" / "seed-0" / "report.html").is_file()
