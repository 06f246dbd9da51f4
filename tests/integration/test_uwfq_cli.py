"""The UWFQ scenario configs and the WTA CSV through the CLI: the issue's commands, and
bad input as one line naming the file and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
)
TREADLE = [sys.executable, "-m", "treadle.cli"]
SCENARIO_2 = TRACES / "uwfq-scenarios" / "micro-synthetic" / "4_super_small_users_default.json"


def treadle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + list(args), capture_output=True, text=True, timeout=600)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def config(**overrides: object) -> str:
    w: dict[str, object] = {
        "workloadName": "w",
        "className": "jobs.implementations.udf.Loop20",
        "totalIterations": 2,
        "startTimeMs": "0",
        "poissonRateInMinutes": 0,
        "frequency": "PARA",
    }
    w.update(overrides)
    return json.dumps([{"user": "u", "workloads": [w]}])


@pytest.mark.parametrize(
    ("name", "text", "needles"),
    [
        ("class.json", config(className="jobs.Nope"), ["className", "unknown job class 'Nope'"]),
        ("rate.json", config(poissonRateInMinutes=-2), ["poissonRateInMinutes", "must be 0.."]),
        (
            "row.csv",
            "workflow_id,ts_submit,ts_submit_seconds,task_count,total_resources,task_id,"
            "runtime,resource_amount_requested,resource_run_time,user_id\n"
            "1,1000,1.0,1,0.1,1,1000,0.1,oops,42\n",
            ["line 2.resource_run_time", "expected a number"],
        ),
    ],
)
def test_bad_input_is_one_line_naming_file_and_field(
    tmp_path: Path, name: str, text: str, needles: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    out = str(tmp_path / "out")
    line = one_line_error(treadle("sim", str(path), "--policy", "uwfq", "--out", out))
    assert str(path) in line
    for needle in needles:
        assert needle in line


@needs_traces
@pytest.mark.slow
def test_compare_scenario_2_under_the_four_policies(tmp_path: Path) -> None:
    proc = treadle(
        "compare",
        str(SCENARIO_2),
        "--policies",
        "spark-fair,ujf,cfq,uwfq",
        "--out",
        str(tmp_path / "cmp"),
    )
    assert proc.returncode == 0, proc.stderr
    for policy in ("spark-fair", "ujf", "cfq", "uwfq"):
        summary = json.loads((tmp_path / "cmp" / policy / "summary.json").read_text())
        assert summary["jobs"] == summary["finished"] == 120
    assert (tmp_path / "cmp" / "report.md").is_file()


@needs_traces
def test_wta_csv_runs(tmp_path: Path) -> None:
    csv = TRACES / "google-wta" / "macro_benchmarks_hetero.csv"
    proc = treadle(
        "sim",
        str(csv),
        "--format",
        "wta",
        "--policy",
        "uwfq",
        "--no-slowdown",
        "--out",
        str(tmp_path / "wta"),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "wta" / "summary.json").read_text())
    assert summary["jobs"] == summary["finished"] == 125


HOMO_CSV = TRACES / "google-wta" / "macro_benchmarks_homo.csv"


@needs_traces
@pytest.mark.parametrize(
    ("flags", "jobs", "tasks"),
    [
        ((), 133, 205_376),
        (("--homo-filter", "5"), 97, 6_624),  # the authors' homo_macro_config.json
        (("--homo-filter", "10"), 106, 7_584),  # the paper's wording
    ],
)
def test_homo_filter_flag(flags: tuple[str, ...], jobs: int, tasks: int) -> None:
    proc = treadle("validate", str(HOMO_CSV), *flags)
    assert proc.returncode == 0, proc.stderr
    assert f", {jobs} jobs, {tasks} tasks," in proc.stdout


@needs_traces
def test_sim_of_the_filtered_homo_csv_records_the_filter(tmp_path: Path) -> None:
    out = tmp_path / "homo"
    proc = treadle(
        *("sim", str(HOMO_CSV), "--homo-filter", "5", "--policy", "uwfq", "--no-slowdown"),
        *("--limit-jobs", "12", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == summary["finished"] == 12
    assert summary["parameters"]["workload"]["importer"] == {"homo_filter": 5.0}


@needs_traces
@pytest.mark.parametrize(
    ("workload", "flags", "needle"),
    [
        (str(HOMO_CSV), ("--homo-filter", "-1"), "--homo-filter must be a number > 0, got '-1'"),
        (str(HOMO_CSV), ("--homo-filter", "ten"), "--homo-filter must be a number > 0"),
        (str(HOMO_CSV), ("--wta-scaling", "0"), "--wta-scaling must be a number > 0"),
        ("demo", ("--homo-filter", "5"), "--homo-filter applies only to a WTA CSV"),
        (str(SCENARIO_2), ("--homo-filter", "5"), "is uwfq"),
    ],
)
def test_bad_importer_flags_are_one_line(
    tmp_path: Path, workload: str, flags: tuple[str, ...], needle: str
) -> None:
    for command in (("sim", "--policy", "uwfq"), ("compare", "--policies", "ujf,uwfq")):
        proc = treadle(command[0], workload, *command[1:], *flags, "--out", str(tmp_path))
        assert needle in one_line_error(proc)
