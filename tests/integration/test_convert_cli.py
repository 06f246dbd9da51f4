"""``treadle convert`` through the command line: ``treadle sim`` of the converted file
prints and writes what ``treadle sim`` of the original does, byte for byte (jobs.csv, the
event log, the printed line; summary.json differs only in its ``source``, the argument
the run was given), and an existing ``--to`` is refused unless ``--force``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.treadle_cli import treadle

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ["TREADLE_TRACES"])


def sim(workload: str, policy: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir()
    run = treadle("sim", workload, "--policy", policy, "--out", "out", "--events", "jsonl", cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run


@pytest.mark.parametrize(
    ("workload", "policy"),
    [
        ("tiny", "fair"),
        ("budgets", "dp"),  # closed-loop jobs and queue accounts
        (str(ROOT / "tests/data/google2011"), "drf"),
        (str(ROOT / "tests/data/google2019/instance_events.csv"), "fifo"),
        (str(ROOT / "tests/data/google2019/instance_events.jsonl"), "fair"),
        (str(TRACES / "sls/2jobs2min-rumen-jh.json"), "capacity"),  # host-named nodes
        (str(TRACES / "sls/inputsls.json"), "fair"),
    ],
    ids=lambda v: Path(v).name,
)
def test_sim_of_the_converted_file_gives_the_same_results(
    tmp_path: Path, workload: str, policy: str
) -> None:
    if workload.startswith(str(TRACES)) and not Path(workload).is_file():
        pytest.skip(f"shared sample {workload} is absent")
    converted = tmp_path / "w.parquet"
    done = treadle("convert", workload, "--to", str(converted))
    assert done.returncode == 0, done.stderr
    # The last line (an importer may note what it left out before it).
    assert done.stdout.splitlines()[-1].startswith(f"{converted}: ")
    assert " jobs, " in done.stdout.splitlines()[-1]
    original = sim(workload, policy, tmp_path / "a")
    again = sim(str(converted), policy, tmp_path / "b")
    assert again.stdout == original.stdout
    a, b = tmp_path / "a" / "out", tmp_path / "b" / "out"
    for name in ("jobs.csv", "events.jsonl"):
        assert (b / name).read_bytes() == (a / name).read_bytes(), name
    summary_a, summary_b = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    assert summary_a["parameters"]["workload"].pop("source") == workload
    assert summary_b["parameters"]["workload"].pop("source") == str(converted)
    assert summary_b == summary_a
    check = treadle("validate", workload), treadle("validate", str(converted))
    assert check[1].stdout.splitlines()[-1] == check[0].stdout.splitlines()[-1]


def test_an_existing_to_is_refused_unless_force(tmp_path: Path) -> None:
    target = tmp_path / "w.parquet"
    target.write_bytes(b"keep me")
    refused = treadle("convert", "tiny", "--to", str(target))
    assert refused.returncode == 2
    assert refused.stderr.strip() == f"error: --to {target}: exists; pass --force to replace it"
    assert target.read_bytes() == b"keep me"
    forced = treadle("convert", "tiny", "--to", str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == f"{target}: 2 jobs, 8 tasks (tiny, from tiny)"
    assert treadle("validate", str(target)).stdout.startswith("tiny: 1 nodes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.parquet"]  # no temporary left


def test_a_workload_that_does_not_load_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "w.parquet"
    failed = treadle("convert", "no-such-workload", "--to", str(target))
    assert failed.returncode == 2
    assert failed.stderr.startswith("error: no-such-workload: no such file or built-in")
    assert list(tmp_path.iterdir()) == []
