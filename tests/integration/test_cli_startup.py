"""`treadle --version`, `--help` and a command's `--help` start fast: they import none of
the heavy modules (numpy, networkx, pyarrow, gRPC, the trace readers, the metrics, the
simulator), and a command imports what it needs (a YAML workload, no trace reader). The
time this saves is measured by ``python -m tests.benchmarks startup``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: A fresh interpreter runs the command line as the console script does, then prints the
#: names of the modules it imported as the last line of stderr.
RUN = """
import json, sys
from treadle.cli import app
try:
    app(sys.argv[1:], prog_name="treadle")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

HEAVY = (
    "numpy",
    "networkx",
    "pyarrow",
    "grpc",
    "structlog",
    "treadle.importers.alibaba2017",
    "treadle.importers.tabular",
    "treadle.metrics",
    "treadle.sim",
    "treadle.study.runner",
)
TRACE_READERS = tuple(
    f"treadle.importers.{name}"
    for name in ("sls", "rumen", "uwfq", "wta", "swf", "alibaba2023", "alibaba2017", "swim")
)


def imported(*args: str, cwd: Path | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return set(names)


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["sim", "--help"],
        ["compare", "--help"],
        ["run", "--help"],
        ["cluster", "--help"],
        ["admin", "--help"],
    ],
    ids=" ".join,
)
def test_version_and_help_import_no_heavy_module(args: list[str]) -> None:
    assert sorted(set(HEAVY) & imported(*args)) == []


def test_validate_of_a_yaml_workload_imports_no_trace_reader() -> None:
    loaded = imported("validate", "demo")
    assert sorted((set(TRACE_READERS) | {"networkx", "numpy"}) & loaded) == []


def test_sim_of_a_yaml_workload_imports_no_trace_reader(tmp_path: Path) -> None:
    args = ("sim", "tiny", "--policy", "fifo", "--no-slowdown", "--events", "none")
    loaded = imported(*args, "--out", str(tmp_path / "out"))
    assert "treadle.sim" in loaded  # it did simulate
    assert sorted(set(TRACE_READERS) & loaded) == []
