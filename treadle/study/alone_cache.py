"""The on-disk cache of alone-JCT references: one small JSON file per reference.

A reference is the JCT of one job run alone on the empty cluster (``runner.alone_jcts``).
Its key is a sha256 of everything the reference simulation reads: the job (all its fields
but ``submit_s``, which the reference sets to 0), the cluster (every node's id, resources
and rack, the heartbeat), the queues, the users, the workload's seed, the reference run's
settings (policy, ask strategy and its parameters, AM interval, stall limit, phase seed)
and the code version: ``source_digest()`` of the installed packages that a run executes
(treadle, rm, am, nm, plugins) and of the plugin entry points. Any edit of those sources
misses the cache, so it never answers for other code.

Files live under ``$TREADLE_CACHE_DIR/alone/`` (else ``$XDG_CACHE_HOME/treadle/alone/``,
else ``~/.cache/treadle/alone/``), as ``KEY[:2]/KEY.json``. A write goes to a temporary
file renamed into place, so concurrent writers (two runs at once) never leave half a file;
an entry that cannot be read or does not hold its own key and a number is a miss (the
reference is recomputed and the entry rewritten), and a cache that cannot be written is
skipped: the cache never fails a run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from treadle.model import JobSpec, Workload
from treadle.registry import source_digest
from treadle.resources import Resources

FORMAT = 1  # bump when what a key covers or an entry holds changes
ENV_DIR = "TREADLE_CACHE_DIR"


def cache_root() -> Path:
    """``$TREADLE_CACHE_DIR``, else treadle's directory in the XDG cache directory."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "treadle"


def code_version() -> str:
    """The code a reference was computed by (``treadle.registry.source_digest``)."""
    return source_digest()


def canonical(obj: Any) -> Any:
    """``obj`` as plain JSON data, every field included (floats keep their exact repr)."""
    if isinstance(obj, Resources):
        return {"Resources": dict(obj.to_dict())}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {type(obj).__name__: fields}
    if isinstance(obj, Mapping):
        return [[canonical(k), canonical(v)] for k, v in obj.items()]
    if isinstance(obj, tuple | list):
        return [canonical(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"no canonical form for {type(obj).__name__}")


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def context_key(workload: Workload, settings: Mapping[str, Any], code: str | None = None) -> str:
    """What every reference of ``workload`` shares: the cluster, queues, users, seed, the
    reference run's ``settings`` and the code version (``code``: the installed one)."""
    return _digest(
        {
            "format": FORMAT,
            "code": code if code is not None else code_version(),
            "cluster": canonical(workload.cluster),
            "queues": canonical(workload.queues),
            "users": canonical(workload.users),
            "seed": workload.seed,
            "settings": canonical(dict(settings)),
        }
    )


def job_key(context: str, job: JobSpec) -> str:
    """The key of ``job``'s reference in ``context`` (``submit_s`` left out: it is 0)."""
    fields = {
        f.name: canonical(getattr(job, f.name))
        for f in dataclasses.fields(job)
        if f.name != "submit_s"
    }
    return _digest([context, fields])


class AloneCache:
    """Alone-JCT references by key, in a directory of small JSON files."""

    def __init__(self, root: Path | None = None) -> None:
        self.dir = (root if root is not None else cache_root()) / "alone"
        self.writable = True

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> float | None:
        """The stored reference, or None: absent, unreadable or not this key's."""
        try:
            data = json.loads(self._path(key).read_text())
            value = data["alone_jct_s"]
            if data["key"] != key or isinstance(value, bool):
                return None
            if isinstance(value, int | float):
                return float(value)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def put(self, key: str, value: float) -> None:
        """Store one reference (atomically); a cache that cannot be written is skipped."""
        if not self.writable:
            return
        path = self._path(key)
        text = json.dumps({"key": key, "alone_jct_s": value}, allow_nan=True)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            self.writable = False  # read-only or full: run on without it

    def put_many(self, items: Iterable[tuple[str, float]]) -> None:
        for key, value in items:
            self.put(key, value)
