"""Reading workloads: files, built-ins, YAML parsing and format inference.

``load_workload`` takes a file path or a built-in name; a YAML file is parsed here
(``parse_workload``: YAML, then the schema, then the builder), a columnar workload
(``.parquet``, ``treadle convert``'s output) is read by ``treadle.workload.columnar``,
and a trace is handed to its importer in ``treadle.importers.FORMATS``, the one table of
trace formats. The columnar format is the model's own, as YAML is, not a trace's: its
header is checked by the YAML workload validator, which the importers may not import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib import resources as package_files
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from treadle import importers
from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile
from treadle.model import Workload
from treadle.workload.build import build_workload
from treadle.workload.errors import from_validation_error, join
from treadle.workload.schema import WorkloadFile
from treadle.yamlfile import read_yaml

YAML = "yaml"
"""The native format: a workload file (``treadle.workload.schema``)."""
YAML_SUFFIXES = (".yaml", ".yml")
COLUMNAR = "parquet"
"""The model's columnar form: a workload ``treadle convert`` wrote
(``treadle.workload.columnar``)."""
COLUMNAR_SUFFIX = ".parquet"


def format_names() -> tuple[str, ...]:
    """Every name ``load_workload`` takes as a format: yaml, parquet, then the trace
    formats."""
    return (YAML, COLUMNAR, *importers.FORMATS)


def builtin_workloads() -> dict[str, str]:
    """Built-in workload names -> one-line description (the file's first comment)."""
    out: dict[str, str] = {}
    for entry in sorted(package_files.files("treadle.workloads").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            first = entry.read_text(encoding="utf-8").partition("\n")[0]
            out[entry.name.removesuffix(".yaml")] = first.removeprefix("#").strip()
    return out


def load_workload(
    arg: str,
    fmt: str | None = None,
    *,
    nodes_file: str | None = None,
    trace_options: Mapping[str, Any] | None = None,
    seed: int | None = None,
    stream: bool = False,
) -> Workload:
    """Load a workload from a file path or a built-in name.

    ``fmt`` is one of ``format_names()`` (``yaml``, ``sls``, ``rumen``, ...); ``None``
    infers it from the suffix (a trace format's suffix is sniffed). An existing file
    wins over a built-in of the same name. ``trace_options`` go to a trace's importer
    (``Importer.load_with``; the WTA CSV's ``homo_filter`` and ``scaling``). ``seed``
    replaces a YAML workload's own ``seed`` (what its generators and distributions draw
    from: another draw of the same workload); a trace has none to replace. ``stream``: a
    format that can be read as a run goes (a columnar workload in submission order, an
    Alibaba 2023 pod list; ``treadle.workload.streaming``) gives a streamed workload
    (``Workload.source``), every other one as without it.
    """
    if fmt is not None and fmt not in format_names():
        expected = join(format_names())
        raise WorkloadError(arg, None, f"unknown format {fmt!r}; expected one of {expected}")
    path = Path(arg)
    if path.is_dir():
        reader = importers.FORMATS.get(fmt or importers.directory_format(path, arg) or "")
        if reader is None or not reader.directories:
            raise WorkloadError(
                arg, None, "is a directory; give a workload file or a built-in name"
            )
        return importers.load_with_options(
            reader, TraceFile(path, arg), nodes_file, trace_options or {}
        )
    if not path.is_file():
        if trace_options:
            raise WorkloadError(arg, None, "importer options apply only to trace files")
        return _load_builtin(arg, fmt, nodes_file, seed)
    trace = TraceFile(path, arg)
    fmt = fmt or _infer_format(trace)
    if fmt == YAML:
        if nodes_file is not None:
            raise WorkloadError(arg, None, "a nodes file applies only to SLS and Rumen traces")
        if trace_options:
            raise WorkloadError(arg, None, "importer options apply only to trace files")
        return parse_workload(trace.text, arg, base_dir=path.parent, seed=seed)
    if seed is not None:
        raise WorkloadError(arg, None, f"a {fmt} trace has no seed to draw another workload from")
    if fmt == COLUMNAR:
        if nodes_file is not None or trace_options:
            raise WorkloadError(arg, None, "a columnar workload takes no nodes file or options")
        # Imported here, by name: pyarrow is paid only by a command that reads one.
        module = "treadle.workload.streaming" if stream else "treadle.workload.columnar"
        name = "open_columnar" if stream else "load_columnar"
        read: Callable[[Path, str], Workload] = getattr(importlib.import_module(module), name)
        return read(path, arg)
    if stream and not trace_options:
        streamed = importers.FORMATS[fmt].stream
        if streamed is not None:
            return streamed(trace, nodes_file)
    return importers.load_with_options(
        importers.FORMATS[fmt], trace, nodes_file, trace_options or {}
    )


def workload_format(arg: str, fmt: str | None = None) -> str:
    """The format ``load_workload(arg, fmt)`` would read ``arg`` as (``yaml`` for a
    built-in name); a file no format recognises raises as loading it would."""
    path = Path(arg)
    if fmt is not None or not path.is_file():
        return fmt or YAML
    return _infer_format(TraceFile(path, arg))


def _load_builtin(
    name: str, fmt: str | None, nodes_file: str | None, seed: int | None = None
) -> Workload:
    builtins = builtin_workloads()
    if name not in builtins:
        hint = f"no such file or built-in workload (built-ins: {join(builtins)})"
        raise WorkloadError(name, None, hint)
    if fmt not in (None, YAML) or nodes_file is not None:
        raise WorkloadError(name, None, "built-in workloads are YAML; no format or nodes file")
    text = package_files.files("treadle.workloads").joinpath(f"{name}.yaml").read_text("utf-8")
    return parse_workload(text, name, seed=seed)


def _infer_format(trace: TraceFile) -> str:
    if trace.path.suffix.lower() in YAML_SUFFIXES:
        return YAML
    if trace.path.suffix.lower() == COLUMNAR_SUFFIX:
        return COLUMNAR
    if importers.claims(trace.path):
        return importers.recognise(trace)
    raise WorkloadError(
        trace.source,
        None,
        f"cannot tell the format from the name; pass a format ({join(format_names())})",
    )


def parse_workload(
    text: str, source: str, *, base_dir: Path | None = None, seed: int | None = None
) -> Workload:
    """Parse and validate YAML workload text; ``source`` names it in error messages.

    Relative paths inside (a ``tpch`` generator's trace) are resolved against
    ``base_dir``, by default the directory of ``source``; ``seed`` replaces the file's."""
    data = parse_yaml(text, source)
    if data is None:
        raise WorkloadError(source, None, "the workload file is empty")
    if not isinstance(data, dict):
        raise WorkloadError(source, None, "the top level must be a mapping (cluster:, jobs:, ...)")
    if seed is not None:
        data = {**data, "seed": seed}
    try:
        doc = WorkloadFile.model_validate(data)
    except ValidationError as e:
        raise from_validation_error(e, source) from None
    base = Path(source).parent if base_dir is None else base_dir
    return build_workload(doc, source, base, Path(source).stem or source)


def parse_yaml(text: str, source: str) -> object:
    """YAML text as plain data, refusing duplicate keys; errors name ``source`` and a line.

    Parsed by ``treadle.yamlload`` (libyaml's C parser where present)."""
    try:
        return read_yaml(text, source, WorkloadError)
    except RecursionError:
        raise WorkloadError(source, None, "nested too deeply to be a workload") from None
