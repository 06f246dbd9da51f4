"""Trace importers: real traces turned into the same ``Workload`` model as YAML files.

This module holds what the importers share: reading files of concatenated JSON objects
(the form Hadoop's SLS and Rumen write), typed access to their fields with errors that
name the file and a path such as ``job[1].job.tasks[3].container.end.ms`` (indices count
from 0), and the dispatch used by ``treadle.workload.load_workload``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

from treadle.errors import WorkloadError
from treadle.model import (
    DEFAULT_RACK,
    ROOT_QUEUE,
    ClusterSpec,
    NodeSpec,
    QueueSpec,
    UserSpec,
    Workload,
)
from treadle.resources import Resources
from treadle.workload import describe_resources, read_text

_WHITESPACE = re.compile(r"\s*")
_TPCH_KEY = re.compile(r"^[^/\s]+/q[0-9]+$")  # as in treadle.importers.tpch


def load_trace(
    path: str | Path, fmt: str | None = None, *, nodes_file: str | None = None, source: str = ""
) -> Workload:
    """Load an SLS or Rumen trace; ``fmt=None`` sniffs the first JSON object."""
    from treadle.importers import rumen, sls  # the submodules import this package

    source = source or str(path)
    objects = read_json_objects(Path(path), source)
    fmt = fmt or _sniff(objects, source)
    if fmt == "sls":
        return sls.sls_workload(objects, source, nodes_file=nodes_file)
    if fmt == "rumen":
        return rumen.rumen_import(objects, source, nodes_file=nodes_file).workload
    raise WorkloadError(source, None, f"unknown trace format {fmt!r}; expected sls or rumen")


def sniff_format(path: str | Path, source: str = "") -> str:
    """``sls`` if the first object has ``job.tasks``, ``rumen`` if it has ``jobID``."""
    source = source or str(path)
    return _sniff(read_json_objects(Path(path), source), source)


def _sniff(objects: list[object], source: str) -> str:
    first = objects[0]
    if isinstance(first, dict):
        if "job.tasks" in first:
            return "sls"
        if "jobID" in first:
            return "rumen"
        if first and all(isinstance(k, str) and _TPCH_KEY.match(k) for k in first):
            raise WorkloadError(
                source,
                None,
                "a TPC-H DAG summary has no cluster or arrivals: use it from a workload "
                "file's generators (kind: tpch, path: ...)",
            )
    raise WorkloadError(
        source, None, "not an SLS trace (no 'job.tasks') nor a Rumen trace (no 'jobID')"
    )


def read_json_objects(path: Path, source: str) -> list[object]:
    """The JSON values in a file of concatenated values (a top-level array is flattened)."""
    text = read_text(path, source)
    decoder = json.JSONDecoder()
    values: list[object] = []
    pos = _skip_space(text, 0)
    while pos < len(text):
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise WorkloadError(source, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None
        values.extend(value if isinstance(value, list) else [value])
        pos = _skip_space(text, pos)
    if not values:
        raise WorkloadError(source, None, "no JSON objects in the file")
    return values


def _skip_space(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


class JsonObject:
    """One JSON object of a trace with typed getters; a JSON ``null`` counts as absent."""

    def __init__(self, source: str, path: str, value: object) -> None:
        if not isinstance(value, dict):
            raise WorkloadError(source, path or None, f"expected a JSON object, got {_kind(value)}")
        self.source = source
        self.path = path
        self._d: dict[str, object] = value

    def __len__(self) -> int:
        return len(self._d)

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str | None, message: str) -> WorkloadError:
        return WorkloadError(self.source, self.where(key) if key else self.path or None, message)

    def has(self, key: str) -> bool:
        return self._d.get(key) is not None

    def _required(self, key: str) -> object:
        value = self._d.get(key)
        if value is None:
            raise self.error(key, "required field is missing")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        if not self.has(key) and default is not None:
            return default
        value = self._required(key)
        if isinstance(value, bool | dict | list):
            raise self.error(key, f"expected a string, got {_kind(value)}")
        return str(value)

    def number(self, key: str, default: float | None = None) -> float:
        """A finite number; numeric strings are accepted (SLS parses them with toString)."""
        if not self.has(key) and default is not None:
            return float(default)
        value = self._required(key)
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise self.error(key, f"expected a number, got {value!r}")
        return number

    def objects(self, key: str, *, required: bool = True) -> list[JsonObject]:
        if not required and not self.has(key):
            return []
        value = self._required(key)
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {_kind(value)}")
        return [JsonObject(self.source, f"{self.where(key)}[{i}]", v) for i, v in enumerate(value)]

    def object(self, key: str) -> JsonObject:
        """A nested object; absent means empty."""
        return JsonObject(self.source, self.where(key), self._d.get(key) or {})


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def split_host(host: str) -> tuple[str, str]:
    """``/rack/node`` -> (rack, node); a bare name is in the default rack."""
    rack, _, node = host.strip("/").rpartition("/")
    return rack or DEFAULT_RACK, node


def cluster_from_hosts(hosts: Iterable[str], node: Resources, source: str) -> ClusterSpec:
    """One node of size ``node`` per distinct host (``/rack/name``), sorted by rack then name."""
    racks: dict[str, str] = {}
    for host in hosts:
        rack, name = split_host(host)
        if not name:
            raise WorkloadError(source, None, f"host {host!r} has no node name")
        if racks.setdefault(name, rack) != rack:
            raise WorkloadError(
                source, None, f"node {name!r} appears in racks {racks[name]!r} and {rack!r}"
            )
    if not racks:
        raise WorkloadError(source, None, "the trace names no hosts; pass a nodes file")
    nodes = sorted((rack, name) for name, rack in racks.items())
    return ClusterSpec(tuple(NodeSpec(name, node, rack) for rack, name in nodes))


def check_fits(cluster: ClusterSpec, demand: Resources, source: str, where: str) -> None:
    if not cluster.fits_some_node(demand):
        raise WorkloadError(
            source,
            where,
            f"a task needs {describe_resources(demand)} and fits no node; the largest node "
            f"has {describe_resources(cluster.largest_node())}",
        )


def flat_queues(names: Iterable[str]) -> QueueSpec:
    """Leaf queues of equal weight under the root, in order of first appearance."""
    unique = dict.fromkeys(names)
    return QueueSpec(ROOT_QUEUE, children=tuple(QueueSpec(n) for n in unique))


def default_users(names: Iterable[str]) -> dict[str, UserSpec]:
    return {n: UserSpec(n) for n in dict.fromkeys(names)}
