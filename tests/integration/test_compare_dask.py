"""``treadle compare --cluster tcp://HOST:PORT``: a real ``dask scheduler`` and two
``dask worker`` processes on localhost run the comparison; the files are those of a local
run, a worker that dies mid-run has its run done again elsewhere, and an unreachable
scheduler is one error line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli import one_line_error, treadle

from treadle.errors import TreadleError
from treadle.study.compare import SimBackend, compare
from treadle.study.runner import PolicyChoice, RunOptions
from treadle.workload import load_workload

ROOT = Path(__file__).resolve().parents[2]
DASK = Path(sys.executable).parent / "dask"
POLICIES = ["sjf", "fifo", "drf"]
START_TIMEOUT_S = 45.0


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".png"
    }


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Each process and its children (a worker's nanny starts one): its own session."""
    for p in processes:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for p in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)  # the group may outlive its leader
        p.wait()


def _wait_for(what: str, ready: Any, processes: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        dead = [p for p in processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            text = "\n".join(f.read_text() for f in log.parent.glob("*.log"))
            pytest.fail(f"{what} did not start:\n{text[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a scheduler (port 0) with two single-threaded workers."""
    tmp = tmp_path_factory.mktemp("dask")
    env = dict(os.environ)
    # The workers import this checkout (its plugins are the installed package's entry
    # points) and this module (the tests' backends); a task whose workers died twice fails.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(Path(__file__).parent)])
    env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "1"
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with open(tmp / f"{name}.log", "wb") as log:
            command = [str(DASK), *args]
            popen = subprocess.Popen(
                command, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            processes.append(popen)

    try:
        file = tmp / "scheduler.json"
        start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", "0",
              "--no-dashboard", "--scheduler-file", str(file))  # fmt: skip
        _wait_for("dask scheduler", file.exists, processes, tmp / "scheduler.log")
        address = json.loads(file.read_text())["address"]
        for i in (1, 2):
            start(f"worker{i}", "worker", address, "--nworkers", "1", "--nthreads", "1",
                  "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{i}",
                  "--local-directory", str(tmp / f"w{i}"))  # fmt: skip

        def two_workers() -> bool:
            logs = [(tmp / f"worker{i}.log").read_text() for i in (1, 2)]
            return all("Registered to:" in text for text in logs)

        _wait_for("dask workers", two_workers, processes, tmp / "scheduler.log")
        yield address
    finally:
        _stop(processes)


def test_a_comparison_on_the_cluster_writes_the_local_files(scheduler: str, tmp_path: Path) -> None:
    common = ["compare", "tiny", "--policies", ",".join(POLICIES), "--set", "drf.across=jobs"]
    common += ["--reference", "fifo", "--paper-compat"]  # figures from the runs' job results
    local = treadle(*common, "--workers", "1", "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = treadle(*common, "--cluster", scheduler, "--out", str(tmp_path / "dask"))
    assert remote.returncode == 0, remote.stderr
    done = [line.split(":")[0] for line in remote.stderr.splitlines() if " jobs, " in line]
    assert sorted(done) == sorted(POLICIES), remote.stderr
    here, there = _files(tmp_path / "local"), _files(tmp_path / "dask")
    assert {f"{p}/summary.json" for p in POLICIES} | {"report.md", "comparison.json"} <= set(here)
    assert set(here) == set(there)
    assert [name for name in here if here[name] != there[name]] == []
    assert "vs_reference" in json.loads(there["comparison.json"])["sjf"]


class DyingBackend(SimBackend):
    """Kills its own process (the Dask worker) when it starts policy ``victim``: the first
    time only while ``marker`` does not exist, else every time."""

    def __init__(self, victim: str, marker: Path | None) -> None:
        self.victim = victim
        self.marker = marker

    def run(self, workload: Any, choice: PolicyChoice, *args: Any, **kwargs: Any) -> Any:
        if choice.name == self.victim and (self.marker is None or not self.marker.exists()):
            if self.marker is not None:
                self.marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(workload, choice, *args, **kwargs)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_run_whose_worker_dies_is_run_again_on_another(scheduler: str, tmp_path: Path) -> None:
    wl = load_workload("tiny")
    choices = [PolicyChoice(p, {}) for p in POLICIES]
    options = RunOptions(slowdown=False)
    compare(wl, choices, tmp_path / "local", SimBackend(), options=options, workers=1)
    dying = DyingBackend("fifo", tmp_path / "fifo-died-once")
    compare(wl, choices, tmp_path / "dask", dying, options=options, cluster=scheduler)
    assert (tmp_path / "fifo-died-once").exists()
    assert _files(tmp_path / "local") == _files(tmp_path / "dask")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_run_that_kills_every_worker_is_one_error_naming_it(
    scheduler: str, tmp_path: Path
) -> None:
    wl = load_workload("tiny")
    choices = [PolicyChoice(p, {}) for p in ("fifo", "drf")]
    with pytest.raises(TreadleError, match=r"^policy drf: .*died.*KilledWorker"):
        compare(
            wl, choices, tmp_path / "out", DyingBackend("drf", None),
            options=RunOptions(slowdown=False), cluster=scheduler,
        )  # fmt: skip


def test_an_unreachable_scheduler_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    address = f"tcp://127.0.0.1:{port}"
    proc = treadle("compare", "tiny", "--policies", "fifo,drf", "--cluster", address,
                   "--out", str(tmp_path / "out"))  # fmt: skip
    line = one_line_error(proc)
    assert address in line
    assert "no Dask scheduler" in line
    assert not (tmp_path / "out").exists()
    bad = treadle("compare", "tiny", "--cluster", "localhost:8786", "--out", str(tmp_path / "o"))
    assert "tcp://HOST:PORT" in one_line_error(bad)
