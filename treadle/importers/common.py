"""What the trace importers share, and the two helpers the workload loader reuses.

Reading input files (``read_text``, ``TraceFile``, files of concatenated JSON objects as
Hadoop's SLS and Rumen write them), typed access to JSON fields with errors that name the
file and a path such as ``job[1].job.tasks[3].container.end.ms`` (indices count from 0),
and the cluster, queues and users a trace implies. This module imports only the kernel,
so that ``treadle.workload`` can build on the importers and never the other way round.
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
)
from treadle.resources import Resources

_WHITESPACE = re.compile(r"\s*")


MAX_INPUT_BYTES = 4 << 30
"""The largest input file read (4 GiB): checked before reading, so a mistaken path to a
disk image fails at once instead of filling memory."""


def read_text(path: Path, source: str) -> str:
    """A UTF-8 file's text; unreadable files raise WorkloadError naming ``source``."""
    try:
        if path.is_dir():
            raise WorkloadError(source, None, "is a directory, not a file")
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise WorkloadError(source, None, f"{size} bytes; at most {MAX_INPUT_BYTES} are read")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise WorkloadError(source, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise WorkloadError(source, None, f"cannot read: {e.strerror or e}") from e


def describe_resources(r: Resources) -> str:
    """``memory_mb=16384, vcores=8``: a resource vector as people write it."""
    return ", ".join(f"{k}={v:g}" for k, v in r.to_dict().items()) or "nothing"


class TraceFile:
    """A trace being imported: its path, the name errors give it (``source``), and its
    text and JSON values, each read at most once and shared by the format sniffers and
    the importer that loads it."""

    def __init__(self, path: Path, source: str = "") -> None:
        self.path = path
        self.source = source or str(path)
        self._text: str | None = None
        self._json: list[object] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = read_text(self.path, self.source)
        return self._text

    @property
    def json_values(self) -> list[object]:
        """The JSON values of a file of concatenated values (a top-level array is flattened)."""
        if self._json is None:
            self._json = parse_json_values(self.text, self.source)
        return self._json

    @property
    def decoded_json(self) -> list[object] | None:
        """The JSON values if something already decoded them, else None (never reads)."""
        return self._json


def read_json_objects(path: Path, source: str) -> list[object]:
    """The JSON values in a file of concatenated values (a top-level array is flattened)."""
    return TraceFile(path, source).json_values


def parse_json_values(text: str, source: str) -> list[object]:
    """The JSON values in ``text``, concatenated values (a top-level array is flattened)."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    pos = _skip_space(text, 0)
    while pos < len(text):
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise WorkloadError(source, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None
        except RecursionError:
            line = text.count("\n", 0, pos) + 1
            raise WorkloadError(source, f"line {line}", "JSON nested too deeply") from None
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
            raise WorkloadError(
                source, path or None, f"expected a JSON object, got {json_kind(value)}"
            )
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
            raise self.error(key, f"expected a string, got {json_kind(value)}")
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
            raise self.error(key, f"expected a list, got {json_kind(value)}")
        return [JsonObject(self.source, f"{self.where(key)}[{i}]", v) for i, v in enumerate(value)]

    def object(self, key: str) -> JsonObject:
        """A nested object; absent means empty."""
        return JsonObject(self.source, self.where(key), self._d.get(key) or {})


def json_kind(value: object) -> str:
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
