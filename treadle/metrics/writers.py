"""The files of one run: summary.json, jobs.csv and events.jsonl (deterministic bytes)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from treadle import events as ev
from treadle.metrics.jobs import JobResult
from treadle.metrics.scan import RecordLike
from treadle.metrics.stats import round6
from treadle.metrics.summary import RunMetrics, analyze

JOBS_CSV_COLUMNS: tuple[str, ...] = (
    "job",
    "name",
    "user",
    "queue",
    "submit_s",
    "start_s",
    "finish_s",
    "jct_s",
    "slowdown",
    "tasks",
    "wait_s",
    "status",
    "alone_jct_s",
)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(round6(v))
    return v


def write_jobs_csv(results: Iterable[JobResult], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(JOBS_CSV_COLUMNS)
        for r in results:
            w.writerow([_cell(getattr(r, c)) for c in JOBS_CSV_COLUMNS])


def write_json(obj: Any, path: Path) -> None:
    """Deterministic JSON: sorted keys, 2-space indent, no NaN, trailing newline."""
    path.write_text(
        json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )


def write_run_outputs(
    records: Iterable[RecordLike],
    out_dir: Path,
    *,
    policy: str,
    user_weights: Mapping[str, float] | None = None,
    run: RunMetrics | None = None,
) -> dict[str, Any]:
    """Write summary.json, jobs.csv and events.jsonl (records in the order given) to
    ``out_dir`` (created if needed) and return the summary. Pass ``run`` when the records
    were already analysed, to skip a second pass."""
    recs = [r if isinstance(r, dict) else dict(r) for r in records]
    out_dir.mkdir(parents=True, exist_ok=True)
    if run is None:
        run = analyze(recs, policy=policy, user_weights=user_weights)
    write_json(run.summary, out_dir / "summary.json")
    write_jobs_csv(run.jobs, out_dir / "jobs.csv")
    ev.write_jsonl(recs, out_dir / "events.jsonl")
    return run.summary
