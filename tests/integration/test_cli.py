"""The treadle command as a user runs it: real processes, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from treadle.event_columns import read_events
from treadle.events import dumps, read_jsonl

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
# CI has ../shared beside the checkout; a checkout alone skips the tests on its samples.
needs_samples = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
)
TREADLE = [sys.executable, "-m", "treadle.cli"]

GOOD_JOB = "{name: s, tasks: 2, duration_s: 5, resources: {vcores: 1, memory_mb: 512}}"
CLUSTER = "cluster:\n  nodes: [{count: 1, resources: {vcores: 4, memory_mb: 8192}}]\n"


def treadle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + list(args), capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


BAD_WORKLOADS = [
    ("malformed yaml", CLUSTER + "jobs: [ {name: a\n", ["line"]),
    (
        "unknown field",
        CLUSTER + f"jobs:\n  - {{name: a, user: u, stagez: [{GOOD_JOB}]}}\n",
        ["jobs[0]", "stagez"],
    ),
    (
        "negative resources",
        CLUSTER
        + "jobs:\n  - {name: a, user: u, stages: "
        + "[{name: s, tasks: 1, duration_s: 1, resources: {vcores: -1}}]}\n",
        ["jobs[0].stages[0].resources.vcores", "greater than or equal to 0"],
    ),
    (
        "task larger than every node",
        CLUSTER
        + "jobs:\n  - {name: a, user: u, stages: "
        + "[{name: s, tasks: 1, duration_s: 1, resources: {vcores: 64}}]}\n",
        ["jobs[0].stages[0].resources", "fits no node"],
    ),
    (
        "dag cycle",
        CLUSTER
        + "jobs:\n  - name: a\n    user: u\n    stages:\n"
        + "      - {name: x, tasks: 1, duration_s: 1, resources: {vcores: 1}, after: [y]}\n"
        + "      - {name: y, tasks: 1, duration_s: 1, resources: {vcores: 1}, after: [x]}\n",
        ["jobs[0].stages", "cycle"],
    ),
]


@pytest.mark.parametrize(
    ("case", "text", "expected"), BAD_WORKLOADS, ids=[c[0] for c in BAD_WORKLOADS]
)
def test_bad_workload_is_one_clear_line(
    case: str, text: str, expected: list[str], tmp_path: Path
) -> None:
    wl = tmp_path / "bad.yaml"
    wl.write_text(text)
    out = tmp_path / "out"
    line = one_line_error(treadle("sim", str(wl), "--policy", "fifo", "--out", str(out)))
    assert str(wl) in line
    for fragment in expected:
        assert fragment in line
    assert not out.exists(), "nothing is written for a bad input"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--policy", "nosuch"], ["unknown policy 'nosuch'", "fifo"]),
        (["--policy", "drf", "--set", "across=racks"], ["drf", "across"]),
        (["--policy", "fifo", "--set", "speed=3"], ["fifo", "speed", "unknown parameter"]),
        (["--policy", "fifo", "--set", "novalue"], ["--set", "key=value"]),
        (["--policy", "gs", "--set", "estimator=nosuch"], ["unknown estimator 'nosuch'", "slearn"]),
        (
            ["--policy", "gs", "--set", "estimator=slearn", "--set", "slearn.ratio=2"],
            ["gs", "estimator 'slearn'", "parameter 'ratio'"],
        ),
    ],
    ids=[
        "unknown policy",
        "bad parameter value",
        "unknown parameter",
        "malformed --set",
        "unknown estimator",
        "bad estimator parameter",
    ],
)
def test_bad_policy_is_one_clear_line(args: list[str], expected: list[str], tmp_path: Path) -> None:
    line = one_line_error(treadle("sim", "tiny", *args, "--out", str(tmp_path / "o")))
    for fragment in expected:
        assert fragment in line
    assert not (tmp_path / "o").exists()


def test_compare_rejects_unknown_policy_before_running(tmp_path: Path) -> None:
    line = one_line_error(
        treadle("compare", "tiny", "--policies", "fifo,nosuch", "--out", str(tmp_path / "c"))
    )
    assert "nosuch" in line
    assert not (tmp_path / "c").exists()


def test_policies_lists_the_builtins() -> None:
    proc = treadle("policies", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    names = {r["name"] for r in data["policies"]}
    assert {"fifo", "capacity", "fair", "drf"} <= names
    assert all(
        r["description"] and not r["description"].startswith("(broken") for r in data["policies"]
    )
    assert "greedy" in {r["name"] for r in data["asks"]}
    assert "oracle" in {r["name"] for r in data["estimators"]}


def _events(out: Path) -> list[dict[str, Any]]:
    """The run's event log, from events.parquet (the default) or events.jsonl."""
    path = out / "events.parquet"
    return read_events(path if path.exists() else out / "events.jsonl")


@needs_samples
@pytest.mark.parametrize(
    ("trace", "jobs", "tasks"),
    [
        ("sls/inputsls.json", 2, 5),
        ("sls/sls_dag.json", 2, 5),
        ("sls/2jobs2min-rumen-jh.json", 3, 193),
    ],
)
def test_sim_runs_the_sample_traces_to_completion(
    trace: str, jobs: int, tasks: int, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = treadle("sim", str(TRACES / trace), "--policy", "fifo", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == jobs
    assert summary["finished"] == jobs
    events = _events(out)
    done = [e for e in events if e["event"] == "container_finished" and e["state"] == "COMPLETE"]
    assert len(done) == tasks
    header = (out / "jobs.csv").read_text().splitlines()[0].split(",")
    assert header[:10] == [
        "job", "name", "user", "queue", "submit_s", "start_s", "finish_s", "jct_s", "slowdown",
        "tasks",
    ]  # fmt: skip


@needs_samples
def test_sls_trace_with_a_nodes_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = treadle(
        "sim", str(TRACES / "sls/inputsls.json"), "--nodes-file", str(TRACES / "sls/nodes.json"),
        "--policy", "drf", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    registered = [e for e in _events(out) if e["event"] == "node_registered"]
    assert len(registered) == 19


def test_compare_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    proc = treadle("compare", "tiny", "--policies", "all", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    comparison = json.loads((out / "comparison.json").read_text())
    assert {"fifo", "capacity", "fair", "drf"} <= comparison.keys()
    for name, summary in comparison.items():
        assert summary["finished"] == summary["jobs"], name
        assert (out / name / "events.parquet").exists()
    report = (out / "report.md").read_text()
    assert "jct_cdf.png" in report
    assert "utilization.png" in report
    for png in ("jct_cdf.png", "utilization.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("events", ["parquet", "jsonl"])
def test_same_seed_same_event_log_bytes(tmp_path: Path, events: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        proc = treadle("sim", "demo", "--policy", "fair", "--out", str(out), "--events", events)
        assert proc.returncode == 0, proc.stderr
    for name in (f"events.{events}", "summary.json", "jobs.csv", "jobs.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_events_option_chooses_the_log_file_and_nothing_else(tmp_path: Path) -> None:
    """parquet (the default), jsonl (time-ordered lines) or none: the other files are the
    same bytes whatever the log's format; the Parquet log holds the JSON log's records."""
    files = {}
    for events in ("parquet", "jsonl", "none"):
        out = tmp_path / events
        proc = treadle("sim", "demo", "--policy", "drf", "--out", str(out), "--events", events)
        assert proc.returncode == 0, proc.stderr
        files[events] = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(files["none"]) == {"summary.json", "jobs.csv", "jobs.parquet"}
    assert set(files["parquet"]) == set(files["none"]) | {"events.parquet"}
    assert set(files["jsonl"]) == set(files["none"]) | {"events.jsonl"}
    for name in files["none"]:
        assert files["parquet"][name] == files["none"][name] == files["jsonl"][name], name
    from_parquet = read_events(tmp_path / "parquet" / "events.parquet")
    from_jsonl = read_jsonl(tmp_path / "jsonl" / "events.jsonl")
    assert sorted(map(dumps, from_parquet)) == sorted(map(dumps, from_jsonl))
    table = pq.read_table(tmp_path / "parquet" / "events.parquet")  # the README's one line
    assert table.num_rows == len(from_jsonl)
    assert table.schema.field("resources_vcores").type == pa.float64()


def test_a_bad_events_value_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = treadle("sim", "demo", "--policy", "fifo", "--out", str(tmp_path), "--events", "csv")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: unknown --events 'csv'; use parquet, jsonl or none"
    ]


@pytest.mark.slow
def test_phase_seed_draws_other_heartbeat_phases(tmp_path: Path) -> None:
    """--phase-seed 0 is the default draw; another seed moves the nodes' heartbeats (the
    first allocation times change) and still runs every job; a negative one is refused."""

    def allocation_times(out: Path) -> list[float]:
        recs = _events(out)
        return [r["t"] for r in recs if r["event"] == "container_allocated"][:10]

    runs = {}
    for name, extra in (
        ("default", []),
        ("zero", ["--phase-seed", "0"]),
        ("one", ["--phase-seed", "1"]),
    ):
        out = tmp_path / name
        proc = treadle("sim", "demo", "--policy", "fifo", "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((out / "summary.json").read_text())["finished"] == 20
        runs[name] = allocation_times(out)
    assert runs["default"] == runs["zero"]
    assert runs["one"] != runs["zero"]
    bad = treadle(
        "sim", "demo", "--policy", "fifo", "--out", str(tmp_path / "x"), "--phase-seed", "-1"
    )
    assert bad.returncode != 0
    assert "--phase-seed" in bad.stderr
    live = treadle(
        "compare", "demo", "--out", str(tmp_path / "y"), "--mode", "local", "--phase-seed", "1"
    )
    assert live.returncode == 2
    assert "--phase-seed applies to --mode sim" in one_line_error(live)


def _files(root: Path) -> dict[str, bytes]:
    """Every result file under ``root`` but the plots (bytes by relative path)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".png"
    }


def test_compare_mode_sim_is_the_one_compare_path_on_the_simulator(tmp_path: Path) -> None:
    """``treadle compare --mode sim`` and the library's one compare path with the
    simulator backend write the same files (told, as the CLI is, where the workload came
    from: summary.json records it)."""
    from treadle.study.compare import SimBackend, compare, make_backend
    from treadle.study.runner import PolicyChoice, RunOptions
    from treadle.workload import load_workload

    wl = load_workload("tiny")
    choices = [PolicyChoice("fifo", {}), PolicyChoice("drf", {"across": "jobs"})]
    backend = make_backend("sim", wl)
    assert isinstance(backend, SimBackend)
    options = RunOptions(workload_source="tiny")
    result = compare(wl, choices, tmp_path / "lib", backend, options=options, baseline="fifo")
    proc = treadle(
        "compare", "tiny", "--mode", "sim", "--policies", "fifo,drf", "--set",
        "drf.across=jobs", "--out", str(tmp_path / "cli"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lib = _files(tmp_path / "lib")
    assert {"report.md", "comparison.json", "fifo/events.parquet", "drf/jobs.csv"} <= set(lib)
    assert lib == _files(tmp_path / "cli")
    assert set(result.runs) == {"fifo", "drf"}
    assert all(r.finished == r.jobs for r in result.results.values())


def test_compare_rejects_an_unknown_mode(tmp_path: Path) -> None:
    line = one_line_error(
        treadle("compare", "tiny", "--mode", "nosuch", "--out", str(tmp_path / "c"))
    )
    assert "--mode 'nosuch'" in line
    assert not (tmp_path / "c").exists()


def test_compare_partitions_the_workload_for_every_policy(tmp_path: Path) -> None:
    out = tmp_path / "p"
    proc = treadle(
        "compare",
        "tiny",
        "--policies",
        "ujf,uwfq",
        "--partition",
        "0.5",
        "--no-slowdown",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    plain = treadle("sim", "tiny", "--policy", "ujf", "--no-slowdown", "--out", str(tmp_path / "q"))
    assert plain.returncode == 0, plain.stderr
    tasks = {
        name: sum(e["tasks"] for e in _events(out / name) if e["event"] == "job_submitted")
        for name in ("ujf", "uwfq")
    }
    before = sum(e["tasks"] for e in _events(tmp_path / "q") if e["event"] == "job_submitted")
    assert tasks["ujf"] == tasks["uwfq"] != before


@pytest.mark.parametrize("value", ["fast", "0", "-2"])
def test_bad_partition_is_one_clear_line(value: str, tmp_path: Path) -> None:
    proc = treadle("sim", "tiny", "--policy", "uwfq", "--partition", value, "--out", str(tmp_path))
    assert "--partition" in one_line_error(proc)
