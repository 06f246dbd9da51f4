"""What the line-oriented trace importers (SWF, SWIM, Alibaba) share: bounded reading of
plain or gzip text, typed fields with errors naming the file, the line and the field, and
the reshaping the SLearn experiments apply to a trace (width cap, arrival stretch, a
prefix of the jobs).

Sizes are bounded before anything is allocated: ``MAX_LINES`` lines of at most
``MAX_LINE_CHARS`` characters, ``MAX_TASKS_PER_STAGE`` tasks in a stage and ``MAX_TASKS``
in a workload (treadle's workload-file bounds).
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from rm.policy.estimator import HISTORY_COLUMNS
from treadle.errors import WorkloadError
from treadle.importers.common import MAX_INPUT_BYTES, TraceFile
from treadle.model import MIN_DURATION_S, JobSpec, StageSpec, Workload

MAX_LINES = 20_000_000
MAX_LINE_CHARS = 1 << 16
MAX_TASKS_PER_STAGE = 1_000_000
MAX_TASKS = 20_000_000
MAX_SECONDS = 1e15
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(trace: TraceFile) -> bool:
    try:
        with trace.path.open("rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def head(trace: TraceFile, chars: int = 4096) -> str:
    """The first characters of a plain or gzip file ('' when unreadable): for sniffing."""
    try:
        if is_gzip(trace):
            with gzip.open(trace.path, "rt", encoding="utf-8", errors="replace") as g:
                return g.read(chars)
        with trace.path.open(encoding="utf-8", errors="replace") as f:
            return f.read(chars)
    except (OSError, EOFError, gzip.BadGzipFile):
        return ""


def lines(trace: TraceFile) -> Iterator[tuple[int, str]]:
    """(line number from 1, line without its end) of a plain or gzip UTF-8 file, read as a
    stream; a file, a decompressed text or a line over the bounds is an error."""
    source = trace.source
    try:
        if trace.path.is_dir():
            raise WorkloadError(source, None, "is a directory, not a file")
        size = trace.path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise WorkloadError(source, None, f"{size} bytes; at most {MAX_INPUT_BYTES} are read")
        opener = gzip.open if is_gzip(trace) else open
        with opener(trace.path, "rt", encoding="utf-8", newline="") as f:
            read = 0
            for n, line in enumerate(f, start=1):
                if n > MAX_LINES:
                    raise WorkloadError(source, f"line {n}", f"more than {MAX_LINES} lines")
                if len(line) > MAX_LINE_CHARS:
                    raise WorkloadError(source, f"line {n}", f"over {MAX_LINE_CHARS} characters")
                read += len(line)
                if read > MAX_INPUT_BYTES:
                    raise WorkloadError(source, f"line {n}", f"over {MAX_INPUT_BYTES} characters")
                yield n, line.rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise WorkloadError(source, None, f"not UTF-8 text ({e.reason})") from None
    except (EOFError, gzip.BadGzipFile) as e:
        raise WorkloadError(source, None, f"broken gzip data: {e}") from None
    except OSError as e:
        raise WorkloadError(source, None, f"cannot read: {e.strerror or e}") from None


class Row:
    """One line's fields, by name, with typed getters whose errors name the file, the line
    and the field: ``trace.swf: line 40.run_time: expected a number, got 'x'``."""

    __slots__ = ("fields", "line", "names", "source")

    def __init__(self, source: str, line: int, names: dict[str, int], fields: list[str]) -> None:
        self.source = source
        self.line = line
        self.names = names
        self.fields = fields

    def error(self, name: str | None, message: str) -> WorkloadError:
        return WorkloadError(
            self.source, f"line {self.line}" + (f".{name}" if name else ""), message
        )

    def text(self, name: str) -> str:
        return self.fields[self.names[name]].strip()

    def number(self, name: str, *, low: float = -MAX_SECONDS, high: float = MAX_SECONDS) -> float:
        """A finite number within [low, high]."""
        raw = self.text(name)
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise self.error(name, f"expected a number, got {raw!r}")
        if not low <= value <= high:
            raise self.error(name, f"must be in {low:g}..{high:g}, got {raw}")
        return value

    def optional(
        self, name: str, *, low: float = -MAX_SECONDS, high: float = MAX_SECONDS
    ) -> float | None:
        """A number, or None when the field is empty."""
        return None if not self.text(name) else self.number(name, low=low, high=high)

    def count(self, name: str, high: int = MAX_TASKS_PER_STAGE) -> int:
        """A whole number 0..high."""
        value = self.number(name, low=0, high=high)
        if not value.is_integer():
            raise self.error(name, f"expected a whole number, got {self.text(name)!r}")
        return int(value)


def check_columns(source: str, line: int, names: tuple[str, ...], fields: list[str]) -> None:
    if len(fields) != len(names):
        listed = f" ({', '.join(names)})" if len(names) <= 8 else ""
        raise WorkloadError(
            source, f"line {line}", f"has {len(fields)} fields, expected {len(names)}{listed}"
        )


class TaskBudget:
    """Counts the tasks a workload will hold, so that no stage is built past the bounds."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.tasks = 0

    def take(self, row: Row, field: str, n: int) -> None:
        if n > MAX_TASKS_PER_STAGE:
            raise row.error(field, f"{n} tasks in one stage; at most {MAX_TASKS_PER_STAGE}")
        self.tasks += n
        if self.tasks > MAX_TASKS:
            raise row.error(field, f"the trace passes {MAX_TASKS} tasks here; at most that")


def duration(seconds: float) -> float:
    """A task duration as the model takes it: at least ``MIN_DURATION_S``."""
    return max(seconds, MIN_DURATION_S)


# ------------------------------------------------------------------ reshaping (SLearn §4.3)


@dataclass(frozen=True)
class Reshape:
    """What the SLearn experiments do to a trace after importing it (spec A3, §4.3), in
    this order: the width cap, the arrival stretch, then the prefix of ``limit_jobs``."""

    width_cap: int | None = None
    """The most tasks a job may have (its width: all its stages' tasks); None: no cap."""
    cap_mode: str = "compress"
    """``compress``: in a job of W > cap tasks, with k = ceil(W / cap), each stage of S
    tasks becomes ceil(S / k) tasks, each running k consecutive original tasks one after
    another (duration = their sum; the last may run fewer), so the job's task-seconds stay
    the same and it has about ``cap`` tasks (at most cap + stages - 1; 2Sigma's
    compression, spec A3); ``drop``: such jobs are left out (the Google traces' rule)."""
    target_load: float | None = None
    """Stretch (or squeeze) submit times by one factor so that the offered load, work over
    capacity x span, is this; None: times as imported."""
    slots: float | None = None
    """The capacity the load is measured against, in vcores (default: the cluster's)."""
    limit_jobs: int | None = None
    """Keep only the first this many jobs by submit time (a bounded prefix)."""

    def __post_init__(self) -> None:
        if self.width_cap is not None and not 1 <= self.width_cap <= MAX_TASKS_PER_STAGE:
            raise ValueError(f"width_cap must be 1..{MAX_TASKS_PER_STAGE}, got {self.width_cap}")
        if self.cap_mode not in ("compress", "drop"):
            raise ValueError(f"cap_mode must be compress or drop, got {self.cap_mode!r}")
        for name in ("target_load", "slots"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0, got {value}")
        if self.limit_jobs is not None and self.limit_jobs < 1:
            raise ValueError(f"limit_jobs must be >= 1, got {self.limit_jobs}")

    def apply(self, wl: Workload) -> Workload:
        jobs = list(wl.jobs)
        if self.width_cap is not None:
            jobs = cap_width(jobs, self.width_cap, self.cap_mode)
        if self.target_load is not None and jobs:
            slots = self.slots or wl.cluster.capacity.get("vcores") or float(len(wl.cluster.nodes))
            jobs = stretch(jobs, stretch_factor(jobs, slots, self.target_load))
        if not jobs:
            raise WorkloadError(wl.name, None, "no job is left after the width cap")
        return first_jobs(replace(wl, jobs=tuple(jobs)), self.limit_jobs)


def first_jobs(wl: Workload, n: int | None) -> Workload:
    """``wl`` with only its first ``n`` jobs by submit time (all of them for None)."""
    if n is None or n >= len(wl.jobs):
        return wl
    return replace(wl, jobs=tuple(sorted(wl.jobs, key=lambda j: j.submit_s)[:n]))


def cap_width(jobs: list[JobSpec], cap: int, mode: str) -> list[JobSpec]:
    """The jobs under the width cap (see ``Reshape.cap_mode``)."""
    out = []
    for job in jobs:
        if job.tasks <= cap:
            out.append(job)
        elif mode == "compress":
            k = math.ceil(job.tasks / cap)
            out.append(replace(job, stages=tuple(_compress(s, k) for s in job.stages)))
    return out


def _compress(stage: StageSpec, k: int) -> StageSpec:
    d = stage.durations
    return replace(stage, durations=tuple(math.fsum(d[i : i + k]) for i in range(0, len(d), k)))


def stretch_factor(jobs: list[JobSpec], slots: float, target_load: float) -> float:
    """k such that the jobs' work (task-seconds x vcores, a task without vcores counting
    one) over ``slots`` x the stretched span is ``target_load``; 1 for a zero span."""
    work = math.fsum(s.work_s * (s.resources.get("vcores") or 1) for j in jobs for s in j.stages)
    first = min(j.submit_s for j in jobs)
    span = max(j.submit_s for j in jobs) - first
    if span <= 0 or work <= 0:
        return 1.0
    return work / (slots * span * target_load)


def stretch(jobs: list[JobSpec], k: float) -> list[JobSpec]:
    """Submit times multiplied by ``k`` from the first one (rounded to the millisecond)."""
    first = min(j.submit_s for j in jobs)
    return [replace(j, submit_s=first + round((j.submit_s - first) * k, 3)) for j in jobs]


def split_history(wl: Workload, fraction: float) -> tuple[Workload, tuple[JobSpec, ...]]:
    """The trace split in time (spec A3, §4.3 step 1): the first ``fraction`` of its jobs
    by submit time as history, the rest as the workload. Times are shifted so that the
    workload starts at 0; the history's are then negative."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    jobs = sorted(wl.jobs, key=lambda j: j.submit_s)
    cut = round(len(jobs) * fraction)
    if not 0 < cut < len(jobs):
        raise WorkloadError(wl.name, None, f"{len(jobs)} jobs cannot be split at {fraction:g}")
    t0 = jobs[cut].submit_s
    moved = [replace(j, submit_s=round(j.submit_s - t0, 3)) for j in jobs]
    return replace(wl, jobs=tuple(moved[cut:])), tuple(moved[:cut])


def write_history(jobs: tuple[JobSpec, ...] | list[JobSpec], path: Path) -> None:
    """``jobs`` as a history CSV (``HISTORY_COLUMNS``: each job's mean task run time over
    all its tasks, its first stage's vcores and memory, and its stages as a JSON list of
    ``[name, tasks, mean_task_s]``), for ``--set gs.point.history=``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(HISTORY_COLUMNS)
        for j in jobs:
            r = j.stages[0].resources
            mean = j.work_s / j.tasks
            vcores, memory = r.get("vcores", 0.0), r.get("memory_mb", 0.0)
            stages = json.dumps(
                [[s.name, s.tasks, s.work_s / s.tasks] for s in j.stages if s.tasks]
            )
            out.writerow((j.name, j.user, j.submit_s, j.tasks, mean, vcores, memory, stages))
