"""Streamed workloads: a columnar workload file read a row group at a time as a run goes
(``Workload.source``, pulled by ``treadle.sim.feed``), instead of decoded whole first.

``open_columnar`` checks what it can before the run, from the file's footer and three of
its columns: the header (cluster, queues, users, admin timeline) exactly as the whole
reader does, the sizes, and that the jobs are in submission order (``submit_s`` never
decreases) with no closed-loop follows and no per-job spending rates. Such a file
streams; any other is read whole (a closed-loop run needs every follower's job at hand,
an account timeline reads every job's rate, and a file out of order would have to be
read whole to be sorted), so every file runs as it did. Each job is checked when its
row group is read, as the whole reader checks it, and a bad one raises the same
``WorkloadError`` (file, ``row group G, job J`` and the field), during the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from treadle.model import JobSource, JobSpec, Workload
from treadle.workload.columnar import ColumnarWorkload


class ColumnarSource(JobSource):
    """The jobs of a columnar workload file, one row group decoded at a time; each
    ``iter()`` opens the file again (and checks its header again)."""

    def __init__(self, path: Path, source: str, jobs: int, tasks: int) -> None:
        self.path = path
        self.source = source
        self.jobs = jobs
        self.tasks = tasks

    def __iter__(self) -> Iterator[JobSpec]:
        return ColumnarWorkload(self.path, self.source).jobs()


def open_columnar(path: Path, source: str = "") -> Workload:
    """The workload in a columnar file: streamed when it can be (see the module), else
    read whole."""
    cw = ColumnarWorkload(path, source)
    if not _streams(cw):
        return cw.workload()
    h = cw.header
    meta = cw.file.metadata
    tasks = _tasks(cw)
    stream = ColumnarSource(path, cw.source, meta.num_rows, tasks)
    return Workload(
        h.doc.name, h.cluster, (), h.queues, h.users, h.doc.seed, {}, h.admin, source=stream
    )


def _streams(cw: ColumnarWorkload) -> bool:
    """Whether the file's jobs are in submission order, with no follows and no rates."""
    try:
        table = cw.file.read(columns=["submit_s", "follows", "spending_rate"])
    except (pa.ArrowException, OSError) as e:
        raise cw.error(None, f"cannot be read ({e})") from None
    for column in ("follows", "spending_rate"):
        if table.column(column).null_count != table.num_rows:
            return False
    submit = table.column("submit_s").combine_chunks()
    if submit.null_count:
        return False  # the whole reader names the row
    if len(submit) < 2:
        return True
    steps = pc.subtract(submit[1:], submit[:-1])
    return bool(pc.min(steps).as_py() >= 0)


def _tasks(cw: ColumnarWorkload) -> int:
    """Tasks in all: one duration per task (the footer's value count)."""
    meta = cw.file.metadata
    leaves = [meta.schema.column(i).path.split(".") for i in range(meta.num_columns)]
    durations = next(i for i, p in enumerate(leaves) if p[0] == "stages" and "durations_s" in p)
    return sum(meta.row_group(g).column(durations).num_values for g in range(meta.num_row_groups))
