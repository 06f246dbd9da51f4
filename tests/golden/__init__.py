"""Golden runs: every policy on the built-in workloads and the SLS/Rumen samples, kept as
digests of their event logs and per-job results, so a change that must not alter what a
run produces (a refactor) is checked byte for byte.

``python -m tests.golden`` prints the digests of the current code; ``--write`` stores them
in ``digests.json`` beside this file (do that only in a commit that changes results on
purpose, and say why in its message).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

from treadle import events as ev
from treadle.registry import discover
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload
from treadle.yarnids import app_sort_key

HERE = Path(__file__).resolve().parent
DIGESTS = HERE / "digests.json"
SHARED = HERE.parents[2] / "shared"
SLS_TRACE = SHARED / "traces" / "sls" / "inputsls.json"
RUMEN_TRACE = SHARED / "traces" / "sls" / "2jobs2min-rumen-jh.json"

#: Workload name -> what ``load_workload`` takes.
WORKLOADS = {
    "demo": "demo",
    "dags": "dags",
    "sls": str(SLS_TRACE),
    "rumen": str(RUMEN_TRACE),
}


def available() -> Iterator[str]:
    for name, arg in WORKLOADS.items():
        if name in ("sls", "rumen") and not Path(arg).exists():
            continue
        yield name


def digest(workload: str, policy: str) -> dict[str, str]:
    """sha256 of the run's event log (canonical JSON lines), of its jobs' (job, finish) and
    of its summary."""
    wl = load_workload(WORKLOADS[workload])
    result, run = run_sim(wl, PolicyChoice(policy, {}), options=RunOptions())
    events = hashlib.sha256()
    for rec in result.records:
        events.update(ev.dumps(rec).encode())
        events.update(b"\n")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for job in sorted(run.jobs, key=lambda j: app_sort_key(j.job)):
        w.writerow([job.job, repr(job.finish_s)])
    summary = json.dumps(run.summary, sort_keys=True, allow_nan=True, default=str)
    return {
        "events": events.hexdigest(),
        "jobs": hashlib.sha256(buf.getvalue().encode()).hexdigest(),
        "summary": hashlib.sha256(summary.encode()).hexdigest(),
    }


def compute() -> dict[str, dict[str, dict[str, str]]]:
    return {wl: {p: digest(wl, p) for p in discover("policies")} for wl in available()}


def stored() -> dict[str, dict[str, dict[str, str]]]:
    data: dict[str, dict[str, dict[str, str]]] = json.loads(DIGESTS.read_text())
    return data
