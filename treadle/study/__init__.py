"""Studies: one policy run in the simulator (``runner``), policies compared on one
workload in the simulator or on live clusters (``compare``), with their reports, and
studies of workloads x policies x parameter grids x replications with their statistics
(``run``: ``treadle.study.studies``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treadle.study.studies import StudyResult


def run(spec: Any, out_dir: Any, **options: Any) -> StudyResult:
    """Run the study ``spec`` (a spec file or its data) in ``out_dir``: only the runs
    missing there (``treadle.study.studies.run``; ``workers``, ``cluster``, ``say``)."""
    from treadle.study.studies import run as run_study

    return run_study(spec, out_dir, **options)
