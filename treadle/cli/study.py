"""``treadle study SPEC.yaml``: workloads x policies x parameter grids x replications,
with confidence intervals and paired tests (``treadle.study.studies``); and ``treadle
compare --seeds N``, its short form (one workload, the compared policies, N phase seeds)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle.cli.common import USAGE, ForceOpt, LogLevelOpt, OutOpt, err, errors, fail
from treadle.cli.options import ClusterOpt, Scaling, WorkersOpt
from treadle.live import logs

if TYPE_CHECKING:
    from treadle.study.runner import PolicyChoice, RunOptions

SpecArg = Annotated[
    Path, typer.Argument(help="The study's spec (YAML; see docs/running-a-study.md).")
]


ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume/--no-resume",
        help="In an existing study directory, run only the missing runs; --no-resume runs "
        "every run again.",
    ),
]


def _say(text: str) -> None:
    err.print(text, markup=False, highlight=False, soft_wrap=True)


def _workers(workers: int | None) -> int:
    if workers is None:
        from treadle.study.parallel import usable_cores

        return usable_cores()
    if workers < 1:
        fail(f"--workers must be >= 1, got {workers}", USAGE)
    return workers


def study(
    spec: SpecArg,
    out_dir: OutOpt,
    workers: WorkersOpt = None,
    cluster: ClusterOpt = None,
    resume: ResumeOpt = True,
    force: ForceOpt = False,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Run a study: every workload x policy x grid point x replication, resumed in an
    existing study directory (only the missing runs run); write runs.parquet, jobs.parquet
    and a report with 95% confidence intervals and paired tests against the baseline."""
    with errors():
        from treadle.study.studies import run

        logs.configure(log_level)
        run(spec, out_dir, workers=_workers(workers), cluster=cluster, say=_say, resume=resume,
            force=force)  # fmt: skip


def compare_seeds(
    seeds: int,
    mode: str,
    out_dir: Path,
    choices: Sequence[PolicyChoice],
    settings: list[str] | None,
    baseline: str | None,
    options: RunOptions,
    workers: int,
    cluster: str | None,
    *,
    queues: tuple[Path | None, bool] = (None, False),
    knobs: Scaling = (None, None, None),
    force: bool = False,
) -> None:
    """``treadle compare --seeds N``: the study of the compared policies over N phase
    seeds from ``--phase-seed`` on, written as ``treadle study`` writes one (with
    ``--queues``/``--strict`` and ``--nodes``/``--nodes-scale``/``--load``, ``queues``
    and ``knobs``)."""
    if mode != "sim":
        fail("--seeds applies to --mode sim", USAGE)
    ignored = options.ask_strategy or options.ask_params or options.partition
    if ignored or options.trace_options or options.events != "parquet":
        fail("--seeds takes the policies, --set, --baseline, --phase-seed and --slowdown; "
             "write a study spec for more (treadle study)", USAGE)  # fmt: skip
    with errors():
        from treadle.registry import parse_settings
        from treadle.study.studies import run

        spec: dict[str, Any] = {
            "workloads": [options.workload_source],
            "policies": [c.name for c in choices],
            "replications": seeds,
            "vary": "phases",
            "first_seed": options.phase_seed,
            "set": parse_settings(settings or []),
            "slowdown": options.slowdown,
        }
        if baseline is not None:
            spec["baseline"] = baseline
        if queues[0] is not None:
            spec |= {"queues": str(queues[0]), "strict_queues": queues[1]}
        scaling = dict(zip(("nodes", "nodes_scale", "load"), knobs, strict=True))
        spec |= {k: v for k, v in scaling.items() if v is not None}
        run(spec, out_dir, workers=workers, cluster=cluster, say=_say, source="--seeds",
            force=force)  # fmt: skip
