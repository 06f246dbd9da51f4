"""What a newcomer meets first, as they meet it (real processes, real files): one exit
status for every usage error, "did you mean" for near misses, the run's parameters in
summary.json, plain lines when piped, decisions at debug level, the license."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from treadle.cli.app import app
from treadle.event_columns import read_events

ROOT = Path(__file__).resolve().parents[2]
TREADLE = [sys.executable, "-m", "treadle.cli"]
USAGE = 2  # click's status for a bad flag; every wrong input uses it too

CLUSTER = "cluster:\n  nodes: [{count: 1, resources: {vcores: 4, memory_mb: 8192}}]\n"
WORKLOAD = (
    CLUSTER
    + "users: {alice: {weight: 2}, bob: {}}\n"
    + "queues: [{name: prod}, {name: dev}]\n"
    + "jobs:\n  - {name: a, user: USER, queue: QUEUE, stages: "
    + "[{name: s, tasks: 2, duration_s: 5, resources: {RESOURCE: 1}}]}\n"
)


def treadle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + list(args), capture_output=True, text=True, timeout=300)


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The command run in this process (the checks that fail before any run: fast). The
    command configures structlog onto the runner's stderr: put back what was there."""
    was = structlog.get_config() if structlog.is_configured() else None
    try:
        result = CliRunner().invoke(app, list(args))
    finally:
        if was is None:
            structlog.reset_defaults()
        else:
            structlog.configure(**was)
    assert not isinstance(result.exception, AssertionError | TypeError | AttributeError)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def workload(tmp_path: Path, user: str = "alice", queue: str = "prod", res: str = "vcores") -> str:
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOAD.replace("USER", user).replace("QUEUE", queue).replace("RESOURCE", res))
    return str(path)


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["sim", "demo", "--policy", "nosuch"],  # unknown policy
        ["sim", "demo", "--policy", "drf", "--set", "across=job"],  # bad --set value
        ["sim", "demo", "--policy", "drf", "--set", "bogus=1"],  # unknown parameter
        ["sim", "demo", "--policy", "drf", "--set", "across"],  # not key=value
        ["sim", "no/such/file.yaml", "--policy", "fifo"],  # bad workload path
        ["sim", "demo", "--policy", "fifo", "--asks", "nosuch"],  # unknown ask strategy
        ["sim", "demo", "--policy", "fifo", "--events", "csv"],
        ["sim", "demo", "--policy", "fifo", "--log-level", "loud"],  # click's own check
        ["sim", "demo", "--policy", "fifo", "--bogus-flag"],  # click's own check
        ["compare", "demo", "--policies", "fifo,nosuch"],
        ["compare", "demo", "--policies", "fifo,drf", "--set", "drf.across=job"],
        ["validate", "no/such/file.yaml"],
    ],
    ids=lambda a: " ".join(a[:4]),
)
def test_every_usage_error_exits_with_one_status(tmp_path: Path, args: list[str]) -> None:
    proc = in_process(*args, *(["--out", str(tmp_path / "out")] if args[0] != "validate" else []))
    assert proc.returncode == USAGE, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_bad_workload_file_is_a_usage_error_too(tmp_path: Path) -> None:
    proc = in_process("validate", workload(tmp_path, queue="nosuch"))
    assert proc.returncode == USAGE
    assert error_line(proc).startswith(f"error: {tmp_path / 'w.yaml'}: jobs[0].queue:")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sim", "demo", "--policy", "drff"], "did you mean 'drf'?"),
        (["compare", "demo", "--policies", "fifo,tetirs"], "did you mean 'tetris'?"),
        (["sim", "demo", "--policy", "drf", "--set", "acros=jobs"], "did you mean 'across'?"),
        (["sim", "demo", "--policy", "fifo", "--asks", "greedyy"], "did you mean 'greedy'?"),
    ],
)
def test_near_miss_names_get_a_suggestion(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = in_process(*args, "--out", str(tmp_path))
    assert proc.returncode == USAGE
    assert error_line(proc).endswith(expected)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"res": "vcore"},
            "jobs[0].stages[0].resources.vcore: no node has resource 'vcore' "
            "(the nodes have vcores, memory_mb); did you mean 'vcores'?",
        ),
        (
            {"user": "alcie"},
            "jobs[0].user: user 'alcie' is not declared in users (alice, bob); "
            "did you mean 'alice'? (declare 'alcie' to add a user)",
        ),
        (
            {"queue": "prd"},
            "jobs[0].queue: unknown queue 'prd'; leaf queues: prod, dev; did you mean 'prod'?",
        ),
    ],
)
def test_near_miss_workload_names_get_a_suggestion(
    tmp_path: Path, kwargs: dict[str, str], expected: str
) -> None:
    path = workload(tmp_path, **kwargs)
    proc = in_process("validate", path)
    assert proc.returncode == USAGE
    assert error_line(proc) == f"error: {path}: {expected}"


def test_an_undeclared_user_unlike_any_declared_one_still_runs(tmp_path: Path) -> None:
    proc = treadle("validate", workload(tmp_path, user="carol"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1  # one line, whole, even through a pipe


def test_summary_records_the_run_parameters(tmp_path: Path) -> None:
    out = tmp_path / "gs"
    proc = treadle(
        "sim", "tiny", "--policy", "gs", "--set", "estimator=slearn", "--set", "queues=5",
        "--partition", "2", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    params = json.loads((out / "summary.json").read_text())["parameters"]
    assert params["policy"]["name"] == "gs"
    assert params["policy"]["params"]["queues"] == 5  # given
    assert params["policy"]["params"]["growth"] == 10.0  # a default, resolved
    assert params["estimator"]["name"] == "slearn"
    assert params["estimator"]["params"]["ratio"] == "adaptive"
    assert params["asks"] == {"name": "greedy", "params": {}}
    assert params["workload"] == {"name": "tiny", "source": "tiny", "seed": 1, "partition": "2"}
    assert params["phase_seed"] == 0


def test_piped_compare_prints_one_line_per_run_and_records_parameters(tmp_path: Path) -> None:
    proc = treadle(
        "compare", "tiny", "--policies", "fifo,carbyne", "--set", "carbyne.guarantee_long=0.7",
        "--workers", "1", "--out", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    carbyne = comparison["carbyne"]["parameters"]
    assert carbyne["policy"]["params"]["guarantee_long"] == 0.7
    assert carbyne["asks"]["name"] == "altruistic"  # the strategy carbyne is designed with
    assert comparison["fifo"]["parameters"]["estimator"] is None
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines] == ["fifo", "carbyne"]
    assert all("jobs, makespan" in line for line in lines)


def test_debug_logs_one_line_per_scheduling_decision(tmp_path: Path) -> None:
    quiet = treadle("sim", "tiny", "--policy", "fifo", "--events", "jsonl", "--out", str(tmp_path))
    assert quiet.returncode == 0
    assert quiet.stderr == ""  # nothing at the default level
    proc = treadle(
        "sim", "tiny", "--policy", "fifo", "--events", "jsonl", "--log-level", "debug",
        "--out", str(tmp_path / "debug"), "--no-slowdown",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    logged = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    placements = [r for r in logged if r["event"] == "placement"]
    allocated = [
        r
        for r in read_events(tmp_path / "debug" / "events.jsonl")
        if r["event"] == "container_allocated"
    ]
    assert [(p["app"], p["node"], p["priority"]) for p in placements] == [
        (r["job"], r["node"], r["priority"]) for r in allocated
    ]
    assert all(p["level"] == "debug" and p["policy"] == "fifo" for p in placements)


def test_license_matches_pyproject() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.split("\n", 2)[:2] == [
        "                                 Apache License",
        "                           Version 2.0, January 2004",
    ]


@pytest.mark.slow
def test_run_replays_on_the_cluster_cluster_up_recorded(tmp_path: Path) -> None:
    """The docs' emulation lines as written: ``cluster up``, then ``run`` without --rm."""

    def cli(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TREADLE, *args], cwd=cwd, capture_output=True, text=True, timeout=120
        )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nothing = cli("run", "tiny", "--out", "out", cwd=elsewhere)
    assert nothing.returncode == USAGE
    assert error_line(nothing) == (
        "error: give --rm HOST:PORT (no cluster is recorded in .treadle/cluster)"
    )
    up = cli("cluster", "up", "--workload", "tiny", "--policy", "fifo", "--dilation", "20")
    try:
        assert up.returncode == 0, up.stderr
        run = cli("run", "tiny", "--out", "out", "--no-slowdown")
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith("fifo: 2/2 jobs")
    finally:
        down = cli("cluster", "down")
    assert down.returncode == 0, down.stderr
