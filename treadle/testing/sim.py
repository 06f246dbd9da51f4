"""``treadle_sim``'s function: one policy's run of a workload in the simulator, in this
process, with nothing written unless an output directory is given."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from treadle.model import Workload
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.testing.results import Results
from treadle.workload import load_workload, parse_workload

#: What a fixture takes as a workload: a ``Workload``, YAML text (it has a newline), or a
#: file path or built-in name (``treadle workloads``).
WorkloadArg = Workload | str | Path


def as_workload(workload: WorkloadArg) -> Workload:
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str) and "\n" in workload:
        return parse_workload(workload, "<test workload>", base_dir=Path.cwd())
    return load_workload(str(workload))


def simulate(
    workload: WorkloadArg,
    policy: str = "fifo",
    params: Mapping[str, Any] | None = None,
    *,
    out_dir: Path | None = None,
    **options: Any,
) -> Results:
    """Simulate ``workload`` under ``policy`` (a name of the ``treadle.policies`` entry
    points, a third party's too) with ``params`` (its ``--set`` settings, checked as the
    CLI checks them). ``options`` are ``treadle.study.runner.RunOptions`` fields; the
    alone-JCT cache is off unless asked for, so that a test writes nothing outside its
    directory. With ``out_dir``, the run's files (summary.json, jobs.csv, ...) go there."""
    wl = as_workload(workload)
    run_options = RunOptions(**{"alone_cache": False, **options})
    result, metrics = run_sim(wl, PolicyChoice(policy, dict(params or {})), out_dir,
                              options=run_options)  # fmt: skip
    return Results(policy, result.records, metrics)
