"""``--out`` is never overwritten by surprise, and ``--nodes`` / ``--nodes-scale`` /
``--load`` scale a workload from the command line, recorded in the run parameters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TREADLE = [sys.executable, "-m", "treadle.cli"]
USAGE = 2


def treadle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + list(args), capture_output=True, text=True, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == USAGE, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command", [["sim", "tiny", "--policy", "drf"], ["compare", "tiny", "--policies", "fifo,drf"]]
)
def test_an_existing_results_directory_is_refused_unless_forced(
    tmp_path: Path, command: list[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # someone's earlier results
    line = one_error_line(treadle(*command, "--out", str(out)))
    assert f"--out {out}" in line
    assert "--force" in line
    assert (out / "summary.json").read_text() == "{}"  # untouched

    proc = treadle(*command, "--out", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    written = out / "drf" / "summary.json" if command[0] == "compare" else out / "summary.json"
    assert json.loads(written.read_text())["policy"] == "drf"


def test_a_file_at_out_is_refused_naming_out(tmp_path: Path) -> None:
    target = tmp_path / "results"
    target.write_text("not a directory")
    line = one_error_line(treadle("sim", "tiny", "--policy", "fifo", "--out", str(target)))
    assert f"--out {target} is a file" in line
    line = one_error_line(
        treadle("sim", "tiny", "--policy", "fifo", "--out", str(target), "--force")
    )
    assert "--out" in line


def test_an_empty_existing_directory_is_fine(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    proc = treadle("sim", "tiny", "--policy", "fifo", "--out", str(out))
    assert proc.returncode == 0, proc.stderr


def test_nodes_and_load_are_applied_and_recorded(tmp_path: Path) -> None:
    out = tmp_path / "scaled"
    proc = treadle("sim", "demo", "--policy", "fifo", "--nodes", "8", "--load", "0.5",
                   "--no-slowdown", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["nodes"] == 8
    scaling = summary["parameters"]["workload"]["scaling"]
    assert scaling["nodes"] == 8
    assert scaling["nodes_before"] == 4
    assert scaling["load"] == 0.5
    assert scaling["arrival_factor"] == pytest.approx(scaling["load_before"] / 0.5, rel=1e-5)


def test_compare_scales_every_run_and_reports_it(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    proc = treadle("compare", "demo", "--policies", "fifo,drf", "--nodes-scale", "0.5",
                   "--no-slowdown", "--workers", "1", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name in ("fifo", "drf"):
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["nodes"] == 2
        assert summary["parameters"]["workload"]["scaling"]["nodes_scale"] == 0.5
    assert (
        "| scaling | nodes=2, nodes_before=4, nodes_scale=0.5 |" in (out / "report.md").read_text()
    )
    inputs = json.loads((out / "report_inputs.json").read_text())
    assert inputs["options"]["scaling"]["nodes"] == 2


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--nodes", "0"], "--nodes must be between 1 and"),
        (["--nodes-scale", "0"], "--nodes-scale must be > 0"),
        (["--nodes-scale", "5000"], "--nodes-scale must be > 0 and <= 1000"),
        (["--load", "-1"], "--load must be > 0"),
        (["--load", "1000"], "--load must be > 0 and <= 100"),
        (["--nodes", "2", "--nodes-scale", "2"], "give --nodes or --nodes-scale, not both"),
    ],
)
def test_bad_scaling_values_are_one_line(tmp_path: Path, flags: list[str], expected: str) -> None:
    line = one_error_line(
        treadle("sim", "tiny", "--policy", "fifo", *flags, "--out", str(tmp_path / "o"))
    )
    assert expected in line
    assert not (tmp_path / "o").exists()


def test_run_refuses_an_existing_results_directory_before_asking_the_rm(tmp_path: Path) -> None:
    """As ``treadle sim``: refused in one line naming --out and --force, before any RM is
    reached (none listens at the address given)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    line = one_error_line(treadle("run", "tiny", "--rm", "127.0.0.1:9", "--out", str(out)))
    assert f"--out {out} already holds files" in line
    assert "--force" in line
    assert (out / "summary.json").read_text() == "{}"
    target = tmp_path / "results"
    target.write_text("not a directory")
    line = one_error_line(treadle("run", "tiny", "--rm", "127.0.0.1:9", "--out", str(target)))
    assert f"--out {target} is a file" in line


def test_run_with_force_writes_into_an_existing_results_directory(tmp_path: Path) -> None:
    from treadle.testing.cluster import ClusterFactory

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    factory = ClusterFactory(tmp_path / "clusters")
    try:
        cluster = factory("tiny", "fifo", secure=False, dilation=20.0)
        proc = treadle("run", "tiny", "--rm", cluster.rm_address, "--out", str(out), "--force",
                       "--no-slowdown")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    finally:
        factory.close()
    assert json.loads((out / "summary.json").read_text())["policy"] == "fifo"
    assert (out / "notes.txt").read_text() == "mine"  # others stay
