"""Trace importers: real traces turned into the same ``Workload`` model as YAML files.

``FORMATS`` is the one table of trace formats, by the name ``--format`` takes: how a file
of the format is recognised and how it is loaded. ``treadle.workload.load_workload``
infers and checks formats through it and nothing else, and the CLI lists its names.
Adding a format is one module (its reader, with a ``sniff`` and a loader taking a
``TraceFile``) and one entry here. A format's module is imported when its sniff or
loader first runs, so a command that reads no trace of it never pays for it. What the
importers share is in ``treadle.importers.common``; ``treadle.importers.tpch`` and
``treadle.importers.synthetic`` feed the workload generators and are not formats.

The importers import only the kernel and each other, never ``treadle.workload``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile
from treadle.model import Workload

_TPCH_KEY = re.compile(r"^[^/\s]+/q[0-9]+$")  # as in treadle.importers.tpch


@dataclass(frozen=True)
class Importer:
    """One trace format of ``FORMATS``."""

    title: str
    """What the format is and what its sniff looks for, for the error when no format
    recognises a file: ``an SLS trace (no 'job.tasks')``."""
    suffixes: tuple[str, ...]
    """File suffixes (lower case) the format's files have: such files are sniffed."""
    sniff: Callable[[TraceFile], bool]
    """Whether a file is of this format (cheap: look at the start of the file)."""
    load: Callable[[TraceFile, str | None], Workload]
    """Load a file of this format; the second argument is an SLS nodes file, or None."""
    load_with: Callable[[TraceFile, str | None, Mapping[str, Any]], Workload] | None = None
    """Load with importer options (``--homo-filter``, ...), for a format that takes
    any; it names the option in its error when one is unknown or bad."""
    directories: bool = False
    """Whether a trace of the format may be a directory (of tables' shards)."""
    stream: Callable[[TraceFile, str | None], Workload] | None = None
    """Open a file of this format as a streamed workload (``Workload.source``: its jobs
    read as the run goes), or load it whole when this file cannot stream; None: the
    format is always loaded whole."""


def _lazy(module: str, name: str) -> Callable[..., Any]:
    """``treadle.importers.<module>.<name>``, imported at its first call."""

    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(f"treadle.importers.{module}"), name)(*args)

    call.__qualname__ = f"{module}.{name}"
    return call


def load_with_options(
    importer: Importer, trace: TraceFile, nodes_file: str | None, options: Mapping[str, Any]
) -> Workload:
    """``importer.load``, or with ``options`` (if any) its ``load_with``."""
    if not options:
        return importer.load(trace, nodes_file)
    if importer.load_with is None:
        raise WorkloadError(
            trace.source, None, f"{importer.title.partition(' (')[0]} takes no importer options"
        )
    return importer.load_with(trace, nodes_file, options)


FORMATS: dict[str, Importer] = {
    "sls": Importer(
        "an SLS trace (no 'job.tasks')",
        (".json",),
        _lazy("sls", "sniff"),
        _lazy("sls", "load_trace"),
    ),
    "rumen": Importer(
        "a Rumen trace (no 'jobID')",
        (".json",),
        _lazy("rumen", "sniff"),
        _lazy("rumen", "load_trace"),
    ),
    "synth": Importer(
        "an SLS SYNTH file (no 'workloads' with 'job_classes')",
        (".json",),
        _lazy("synth", "sniff"),
        _lazy("synth", "load_trace"),
    ),
    "uwfq": Importer(
        "a UWFQ scenario config (no 'user' and 'workloads')",
        (".json",),
        _lazy("uwfq", "sniff"),
        _lazy("uwfq", "load_trace"),
    ),
    "wta": Importer(
        "a WTA macro-benchmark CSV (no 'workflow_id,ts_submit' header)",
        (".csv",),
        _lazy("wta", "sniff"),
        _lazy("wta", "load_trace"),
        _lazy("wta", "load_trace_with"),
    ),
    "swf": Importer(
        "a Standard Workload Format log (no '; MaxNodes:' header nor 18-field lines)",
        (".swf", ".gz"),
        _lazy("swf", "sniff"),
        _lazy("swf", "load_trace"),
    ),
    "alibaba2023": Importer(
        "an Alibaba 2023 GPU pod list (no 'name,cpu_milli,memory_mib,num_gpu,gpu_milli' header)",
        (".csv",),
        _lazy("alibaba2023", "sniff"),
        _lazy("alibaba2023", "load_trace"),
        stream=_lazy("alibaba2023", "stream_trace"),
    ),
    "alibaba2017": Importer(
        "an Alibaba 2017 batch_task CSV (no 'task_create_time, task_end_time, job_id' header)",
        (".csv",),
        _lazy("alibaba2017", "sniff"),
        _lazy("alibaba2017", "load_trace"),
    ),
    "google2011": Importer(
        "a Google 2011 task_events shard or trace directory (no 13-field rows of numbers)",
        (".csv", ".gz"),
        _lazy("google2011", "sniff"),
        _lazy("google2011", "load_trace"),
        _lazy("google2011", "load_trace_with"),
        directories=True,
    ),
    "google2019": Importer(
        "a Google 2019 instance_events export (no 'time,type,collection_id,instance_index')",
        (".csv", ".gz", ".jsonl"),
        _lazy("google2019", "sniff"),
        _lazy("google2019", "load_trace"),
        _lazy("google2019", "load_trace_with"),
    ),
    "swim": Importer(
        "a SWIM workload TSV (no 'job<N><tab>' lines of 6 fields)",
        (".tsv",),
        _lazy("swim", "sniff"),
        _lazy("swim", "load_trace"),
    ),
}
"""Trace formats by name, in the order they are sniffed."""


def load_trace(
    path: str | Path,
    fmt: str | None = None,
    *,
    nodes_file: str | None = None,
    source: str = "",
    options: Mapping[str, Any] | None = None,
) -> Workload:
    """Load a trace of format ``fmt`` (a name in ``FORMATS``); ``None`` sniffs it.
    ``options`` go to the format's importer (``Importer.load_with``)."""
    trace = TraceFile(Path(path), source)
    fmt = fmt or recognise(trace)
    importer = FORMATS.get(fmt)
    if importer is None:
        expected = or_list(FORMATS)
        raise WorkloadError(
            trace.source, None, f"unknown trace format {fmt!r}; expected {expected}"
        )
    return load_with_options(importer, trace, nodes_file, options or {})


def sniff_format(path: str | Path, source: str = "") -> str:
    """The name of the format of the trace at ``path`` (see ``recognise``)."""
    return recognise(TraceFile(Path(path), source))


def directory_format(path: Path, source: str = "") -> str | None:
    """The first format that reads directories whose sniff accepts ``path``, or None."""
    trace = TraceFile(path, source)
    for name, importer in FORMATS.items():
        if importer.directories and importer.sniff(trace):
            return name
    return None


def claims(path: Path) -> bool:
    """Whether some format's files are named like ``path`` (by its suffix)."""
    suffix = path.suffix.lower()
    return any(suffix in importer.suffixes for importer in FORMATS.values())


def recognise(trace: TraceFile) -> str:
    """The first format, in table order, whose sniff accepts ``trace``, among the formats
    whose files are named like it (all of them if none is)."""
    suffix = trace.path.suffix.lower()
    candidates = {n: i for n, i in FORMATS.items() if suffix in i.suffixes} or FORMATS
    for name, importer in candidates.items():
        if importer.sniff(trace):
            return name
    values = trace.decoded_json
    first = values[0] if values else None
    if isinstance(first, dict) and first and all(_TPCH_KEY.match(k) for k in first):
        raise WorkloadError(
            trace.source,
            None,
            "a TPC-H DAG summary has no cluster or arrivals: use it from a workload "
            "file's generators (kind: tpch, path: ...)",
        )
    titles = " nor ".join(i.title for i in candidates.values())
    raise WorkloadError(trace.source, None, f"not {titles}")


def or_list(names: Iterable[str]) -> str:
    """``sls or rumen``, ``sls, rumen or swf``."""
    *rest, last = names
    return f"{', '.join(rest)} or {last}" if rest else last
