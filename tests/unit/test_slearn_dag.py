"""SLearn-DAG and 3Sigma-DAG (spec slearn.md A1.4 item 7): the per-stage history, the
hand-checked sizes of a two-stage job, the fallbacks and bad parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from plugins.estimators.slearn import dag_size
from rm.policy.estimator import HistoryJob, HistoryStage, history_of, read_history
from treadle import registry
from treadle.cli.app import app
from treadle.errors import InputError, PluginError
from treadle.importers.tabular import write_history
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import Simulation

SLOT = Resources(vcores=1, memory_mb=1024)

#: One past run of ``etl``: 4 maps of 8 s, then 2 reduces of 32 s (job mean 16 s).
HISTORY = (
    "name,user,submit_s,tasks,mean_task_s,vcores,memory_mb,stages\n"
    'etl:1,u,-100,6,16,1,1024,"[[""map"", 4, 8.0], [""reduce"", 2, 32.0]]"\n'
)
OLD_HISTORY = "name,user,submit_s,tasks,mean_task_s,vcores,memory_mb\netl:1,u,-100,6,16,1,1024\n"


def mr_job(name: str, maps: list[float], reduces: list[float], stage2: str = "reduce") -> JobSpec:
    return JobSpec(
        name,
        "u",
        0.0,
        (StageSpec("map", SLOT, tuple(maps)), StageSpec(stage2, SLOT, tuple(reduces), ("map",))),
    )


def workload(*jobs: JobSpec) -> Workload:
    node = NodeSpec("n0", Resources(vcores=20, memory_mb=20 * 1024))
    return Workload("t", ClusterSpec((node,)), jobs, seed=0)


def estimates(wl: Workload, params: dict[str, Any]) -> tuple[list[float], list[dict[str, Any]]]:
    """The ``job_estimated`` sizes of a gs run (submission order) and its event log."""
    p = registry.build("policies", "gs", params)
    result = Simulation(wl, p, lambda: registry.build("asks", "greedy"), policy_name="gs").run()
    assert result.stalled is None
    return [r["estimate_s"] for r in result.records if r["event"] == "job_estimated"], list(
        result.records
    )


@pytest.fixture
def history(tmp_path: Path) -> str:
    path = tmp_path / "h.csv"
    path.write_text(HISTORY)
    return str(path)


def test_the_hand_checked_two_stage_job(history: str) -> None:
    """etl:2 has 10 maps of 24 s and 3 reduces of 40 s; one pilot (10% of 10 maps).
    3Sigma of a single past value is that value: map 8 s, reduce 32 s, job 16 s.

    - slearn-dag: d_s = 24 x 10 = 240, d_h = 8 x 10 = 80, ratio 3; reduce 32 x 3 x 3 =
      288; size 240 + 288 = 528.
    - 3sigma-dag: 8 x 10 + 32 x 3 = 176.
    - plain slearn: 24 x 13 = 312; plain 3sigma: 16 x 13 = 208."""
    wl = workload(mr_job("etl:2", [24.0] * 10, [40.0] * 3))
    slearn = {"estimator": "slearn", "slearn.ratio": 0.1}
    dag = slearn | {"slearn.dag": True, "slearn.history": history}
    assert estimates(wl, dag)[0] == pytest.approx([528.0])
    assert estimates(wl, slearn)[0] == pytest.approx([312.0])
    sigma = {"estimator": "3sigma", "3sigma.history": history}
    assert estimates(wl, sigma | {"3sigma.dag": True})[0] == pytest.approx([176.0])
    assert estimates(wl, sigma)[0] == pytest.approx([208.0])


def test_dag_size_rule_and_its_fallbacks() -> None:
    # Pilots' mean 24 s; history: map 8 s (ratio 3), reduce 32 s.
    assert dag_size(24.0, [10, 3], [8.0, 32.0]) == 240 + 32 * 3 * 3
    # A later stage without history: plain slearn's rule, the pilots' mean x its tasks.
    assert dag_size(24.0, [10, 3, 5], [8.0, 32.0, None]) == 240 + 288 + 24 * 5
    # A first stage without history: the later stages' history unscaled (ratio 1).
    assert dag_size(24.0, [10, 3], [None, 32.0]) == 240 + 32 * 3
    assert dag_size(24.0, [10, 3], [0.0, 32.0]) == 240 + 32 * 3
    # No history at all: plain slearn.
    assert dag_size(24.0, [10, 3], [None, None]) == 24.0 * 13


def test_a_stage_without_history_falls_back(history: str) -> None:
    """etl:3's second stage is ``sort``, never seen: slearn-dag sizes it by the pilots'
    mean (24 x 3), 3sigma-dag by the job-level history (16 x 3)."""
    wl = workload(mr_job("etl:3", [24.0] * 10, [40.0] * 3, stage2="sort"))
    dag = {"estimator": "slearn", "slearn.ratio": 0.1, "slearn.dag": True}
    assert estimates(wl, dag | {"slearn.history": history})[0] == pytest.approx([240.0 + 72.0])
    sigma = {"estimator": "3sigma", "3sigma.history": history, "3sigma.dag": True}
    assert estimates(wl, sigma)[0] == pytest.approx([80.0 + 48.0])


def test_a_history_without_stages_gives_the_plain_estimators(tmp_path: Path) -> None:
    """Old history files (no ``stages`` column) still load; on them every stage falls
    back, so the DAG variants run exactly as the plain ones."""
    old = tmp_path / "old.csv"
    old.write_text(OLD_HISTORY)
    assert read_history(str(old))[0].stages == ()
    wl = workload(
        mr_job("etl:2", [24.0, 20.0, 28.0, 22.0], [40.0] * 3),
        JobSpec("x", "u", 5.0, (StageSpec("s", SLOT, (9.0, 11.0, 10.0)),)),
    )
    slearn = {"estimator": "slearn", "slearn.ratio": 0.5}
    dag = slearn | {"slearn.dag": True, "slearn.history": str(old)}
    assert estimates(wl, dag)[1] == estimates(wl, slearn)[1]
    sigma = {"estimator": "3sigma", "3sigma.history": str(old)}
    assert estimates(wl, sigma | {"3sigma.dag": True})[0] == estimates(wl, sigma)[0]


def test_thin_history_sizes_thin_jobs_by_3sigma_dag(history: str) -> None:
    """One map (thin to slearn) and 3 reduces: ``thin=history`` sizes it at arrival by
    3Sigma-DAG, 8 x 1 + 32 x 3 = 104; by default it goes to the top queue unestimated."""
    wl = workload(mr_job("etl:4", [24.0], [40.0] * 3))
    dag = {"estimator": "slearn", "slearn.dag": True, "slearn.history": history}
    assert estimates(wl, dag)[0] == []
    assert estimates(wl, dag | {"slearn.thin": "history"})[0] == pytest.approx([104.0])


def test_history_keeps_each_stage(tmp_path: Path) -> None:
    job = mr_job("etl:9", [24.0, 16.0], [40.0] * 3)
    path = tmp_path / "h.csv"
    write_history([job], path)
    (past,) = read_history(str(path))
    assert past == history_of([job])[0]
    assert past.stages == (HistoryStage("map", 2, 20.0), HistoryStage("reduce", 3, 40.0))
    assert past == HistoryJob("etl:9", "u", 0.0, 5, 32.0, 1.0, 1024.0, past.stages)


@pytest.mark.parametrize(
    "cell",
    ['"[[""map"", 4]]"', "nope", '"[[""map"", -1, 2.0]]"', '"[[""map"", 4, ""x""]]"'],
)
def test_a_bad_stages_cell_names_its_line(tmp_path: Path, cell: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(HISTORY + f"etl:2,u,-50,6,16,1,1024,{cell}\n")
    with pytest.raises(InputError, match=r"bad\.csv: line 3, stages: not a JSON list of") as e:
        read_history(str(bad))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"estimator": "slearn", "slearn.history": "h.csv"},
            "estimator 'slearn': parameter 'history': Value error, only used with dag=true",
        ),
        (
            {"estimator": "slearn", "slearn.thin": "history"},
            "estimator 'slearn': parameter 'thin': Value error, only used with dag=true",
        ),
        (
            {"estimator": "slearn", "slearn.dag": True, "slearn.thin": "bottom"},
            "estimator 'slearn': parameter 'thin': Input should be 'top' or 'history'",
        ),
        (
            {"estimator": "slearn", "slearn.dag": "maybe"},
            "estimator 'slearn': parameter 'dag': Input should be a valid boolean",
        ),
        (
            {"estimator": "3sigma", "3sigma.dag": True, "3sigma.online": True},
            "estimator '3sigma': parameter 'dag': Value error, not with online=true",
        ),
        (
            {"estimator": "slearn", "slearn.dag": True, "slearn.history": "/nonexistent.csv"},
            "/nonexistent.csv: cannot read history",
        ),
    ],
)
def test_bad_dag_parameters_are_one_clear_error(params: dict[str, Any], expected: str) -> None:
    with pytest.raises((PluginError, InputError)) as e:
        registry.build("policies", "gs", params)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_dag_parameter_on_the_command_line_exits_2(tmp_path: Path) -> None:
    args = ["sim", "demo", "--policy", "gs", "--set", "estimator=slearn"]
    args += ["--set", "slearn.window_days=3", "--out", str(tmp_path / "out")]
    # The command configures structlog onto the runner's stderr: put back what was there
    # (else later tests log to a closed stream).
    was = structlog.get_config() if structlog.is_configured() else None
    try:
        result = CliRunner().invoke(app, args)
    finally:
        if was is None:
            structlog.reset_defaults()
        else:
            structlog.configure(**was)
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines == [
        "error: policy 'gs': estimator 'slearn': parameter 'window_days': "
        "Value error, only used with dag=true"
    ]
