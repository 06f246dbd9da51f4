"""``treadle study SPEC.yaml`` and ``treadle.study.run``: a study from its spec to its
tables and report.

The spec is validated whole and every unit keyed before anything runs
(``treadle.study.spec``, ``treadle.study.units``); the units missing from the directory
run (``--resume`` is what an existing study directory gets); then ``runs.parquet``,
``jobs.parquet``, the statistics and ``report.md`` / ``report.html`` are written again
from every complete run, so that they are the same bytes however the runs came about.
Drill-down: each replication is also a comparison directory,
``replications/W-WORKLOAD/seed-S/`` (a link per config to its run), with the compare
report of the first replication (``drill_down: first``), of every one (``all``) or none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle.study.spec import Study, load_spec, parse_spec
from treadle.study.units import (
    RUNS_DIR,
    Unit,
    execute,
    pending,
    prepare_dir,
    units_of,
    write_atomic,
)

if TYPE_CHECKING:  # scipy loads when the statistics are computed: a bad spec fails fast
    from treadle.study.analysis import Analysis

Say = Callable[[str], None]
REPLICATIONS_DIR = "replications"


@dataclass
class StudyResult:
    out_dir: Path
    runs: int
    executed: int
    analysis: Analysis
    report: Path


def _quiet(_: str) -> None:
    pass


def run(
    spec: str | Path | Mapping[str, Any] | Study,
    out_dir: str | Path,
    *,
    workers: int = 1,
    cluster: str | None = None,
    say: Say = _quiet,
    source: str = "<study>",
    resume: bool = True,
    force: bool = False,
) -> StudyResult:
    """Run the study ``spec`` (a spec file, its data, or a loaded ``Study``) in
    ``out_dir``: only its runs missing there (see the module). ``source`` names spec data
    in errors; ``resume`` false runs every run again, the complete ones too; ``force`` takes
    over an ``out_dir`` that holds something else (``units.prepare_dir``)."""
    if isinstance(spec, Study):
        study = spec
    elif isinstance(spec, Mapping):
        study = parse_spec(dict(spec), source)
    else:
        study = load_spec(Path(spec))
    out = Path(out_dir)
    units = units_of(study)  # every key: a bad input fails here, before any run
    if workers < 1:
        from treadle.errors import InputError

        raise InputError("--workers", None, f"must be >= 1, got {workers}")
    prepare_dir(out, study, force=force)
    todo = pending(units, out, resume)
    where = f"on {cluster}" if cluster else f"with {workers} worker" + "s" * (workers > 1)
    already = len(units) - len(todo)
    say(f"study: {len(units)} runs, {already} already done, running {len(todo)} {where}")
    count = [len(units) - len(todo)]

    def done(unit: Unit) -> None:
        count[0] += 1
        what = f"{unit.workload_name} {unit.config.label} seed {unit.replication.seed}"
        say(f"[{count[0]}/{len(units)}] {what}")

    execute(todo, out, workers=workers, cluster=cluster, on_done=done)
    return _finish(study, units, out, len(todo), say)


def _finish(study: Study, units: list[Unit], out: Path, executed: int, say: Say) -> StudyResult:
    from treadle.study import study_html, study_report, tables
    from treadle.study.analysis import analyse

    runs = tables.write_tables(units, out, list(study.doc.set))
    analysis = analyse(study, runs.to_pydict())
    drill = _drill_down(study, units, out)
    report = out / study_report.REPORT_MD
    write_atomic(report, study_report.markdown(analysis, drill, out).encode("utf-8"))
    page = study_html.render(analysis, drill, out)
    write_atomic(out / study_report.REPORT_HTML, page.encode("utf-8"))
    say(f"study: {len(units)} runs ({executed} run now) -> {out / tables.RUNS_PARQUET}")
    say(f"report: {report} and {report.with_suffix('.html')}")
    return StudyResult(out, len(units), executed, analysis, report)


def _drill_down(study: Study, units: list[Unit], out: Path) -> dict[tuple[str, int], Path]:
    """Each replication as a comparison directory; the reports ``drill_down`` asks for.
    Returns the directories by (workload, replication), with a report or not."""
    from treadle.report.inputs import ReportInputs
    from treadle.report.rebuild import rebuild
    from treadle.study.runner import policy_parameters, run_options

    dirs: dict[tuple[str, int], Path] = {}
    groups: dict[tuple[int, int], list[Unit]] = {}
    for u in units:
        groups.setdefault((u.workload_index, u.replication.index), []).append(u)
    for (w, r), members in groups.items():
        first = members[0]
        where = (
            out / REPLICATIONS_DIR / f"{w}-{first.workload_name}" / f"seed-{first.replication.seed}"
        )
        where.mkdir(parents=True, exist_ok=True)
        for u in members:
            link = where / u.config.label
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(os.path.relpath(out / RUNS_DIR / u.key, where))
        dirs[(first.workload_name, r)] = where
        if study.doc.drill_down == "none" or (study.doc.drill_down == "first" and r > 0):
            continue
        wl = first.workload
        ReportInputs(
            title=f"treadle: {first.workload_name}, replication {r} (seed "
            f"{first.replication.seed}) under {len(members)} configs",
            policies=[u.config.label for u in members],
            baseline=study.baseline,
            users=list(wl.users),
            user_weights={n: u.weight for n, u in wl.users.items()},
            parameters={
                u.config.label: policy_parameters([u.config.choice], u.options)[u.config.policy]
                for u in members
            },
            options=run_options(first.options),
        ).write(where)
        rebuild(where)
    return dirs
