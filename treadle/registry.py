"""Plugin discovery and loading, kept apart (as flake8 does).

Discovery reads entry points and imports nothing; loading imports one plugin, checks its
type and wraps any failure with the distribution that provides it; building validates
the plugin's parameters. Built-in plugins are registered in pyproject.toml exactly as a
third-party package would register its own.

Each plugin API declares its entry-point group (``ENTRY_POINT_GROUP`` in ``rm.policy``,
``rm.policy.estimator`` and ``am.asks``); ``KINDS`` names each API's base class by a string,
imported only when a plugin is loaded, so the registry imports neither ``rm`` nor ``am``.

Entry points do not change while a process runs, so each group is read once per process
(reading package metadata costs milliseconds, and the alone-JCT references build a policy
and an ask strategy for each distinct job shape); ``reset_cache()`` forgets what was read,
for a test that installs or fakes plugins within one process.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from treadle.errors import PluginError


@dataclass(frozen=True)
class Kind:
    """A kind of plugin: the API that declares it is imported only to load a plugin."""

    group: str  # the entry-point group (the API module's ``ENTRY_POINT_GROUP``)
    base: str  # "module:Class" that every plugin of the kind subclasses
    noun: str  # for messages


KINDS: dict[str, Kind] = {
    "policies": Kind("treadle.policies", "rm.policy:Policy", "policy"),
    "estimators": Kind("treadle.estimators", "rm.policy.estimator:Estimator", "estimator"),
    "asks": Kind("treadle.asks", "am.asks:AskStrategy", "ask strategy"),
}
GROUPS: dict[str, str] = {kind: k.group for kind, k in KINDS.items()}
KIND_NAMES: dict[str, str] = {kind: k.noun for kind, k in KINDS.items()}


@dataclass(frozen=True)
class PolicyChoice:
    """A policy by name with its parameters (validated when built): what a run, simulated
    or live, is asked to schedule with."""

    name: str
    params: Mapping[str, Any]


def base_class(kind: str) -> type:
    """The class every plugin of ``kind`` subclasses (imports its API)."""
    module, _, attr = KINDS[kind].base.partition(":")
    base: type = getattr(importlib.import_module(module), attr)
    return base


@dataclass(frozen=True)
class PluginInfo:
    kind: str  # "policies" | "estimators" | "asks"
    name: str
    value: str  # "module:attr"
    dist: str  # distribution that registers it
    entry_point: EntryPoint


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return str(getattr(dist, "name", None) or "unknown distribution")


@functools.cache
def _installed(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``, read once per process (see ``reset_cache``)."""
    return tuple(entry_points(group=group))


@functools.cache
def _discovered(kind: str) -> dict[str, PluginInfo]:
    return _discover(kind, _installed(GROUPS[kind]))


def reset_cache() -> None:
    """Forget the entry points read so far: the next lookup reads package metadata again."""
    _installed.cache_clear()
    _discovered.cache_clear()


def discover(kind: str, eps: Iterable[EntryPoint] | None = None) -> dict[str, PluginInfo]:
    """The plugins of ``kind`` by name, sorted; two registrations of one name are an error.
    Without ``eps``, the installed ones (read once per process)."""
    if kind not in GROUPS:
        raise PluginError(f"unknown plugin kind {kind!r}; expected one of {sorted(GROUPS)}")
    if eps is None:
        return dict(_discovered(kind))  # a copy: callers may change theirs
    return _discover(kind, eps)


def _discover(kind: str, found: Iterable[EntryPoint]) -> dict[str, PluginInfo]:
    out: dict[str, PluginInfo] = {}
    for ep in sorted(found, key=lambda e: (e.name, e.value)):
        info = PluginInfo(kind, ep.name, ep.value, _dist_name(ep), ep)
        prev = out.get(ep.name)
        if prev is not None and prev.value != ep.value:
            raise PluginError(
                f"{KIND_NAMES[kind]} {ep.name!r} is registered twice: by {prev.dist} "
                f"({prev.value}) and by {info.dist} ({info.value})"
            )
        out[ep.name] = info
    return out


def load(info: PluginInfo) -> type:
    """Import one plugin class and check that it is of the right kind."""
    try:
        obj = info.entry_point.load()
    except Exception as e:
        raise PluginError(
            f"{KIND_NAMES[info.kind]} {info.name!r} from {info.dist} failed to load "
            f"({info.value}): {type(e).__name__}: {e}"
        ) from e
    if not (isinstance(obj, type) and issubclass(obj, base_class(info.kind))):
        raise PluginError(
            f"{KIND_NAMES[info.kind]} {info.name!r} from {info.dist} ({info.value}) "
            f"is not a subclass of {KINDS[info.kind].base.replace(':', '.')}"
        )
    return obj


def lookup(kind: str, name: str, eps: Iterable[EntryPoint] | None = None) -> PluginInfo:
    if kind not in GROUPS:
        raise PluginError(f"unknown plugin kind {kind!r}; expected one of {sorted(GROUPS)}")
    found = _discovered(kind) if eps is None else _discover(kind, eps)
    if name not in found:
        known = ", ".join(found) or "none installed"
        raise PluginError(
            f"unknown {KIND_NAMES[kind]} {name!r} (installed: {known}){did_you_mean(name, found)}"
        )
    return found[name]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'X'?"`` for the known name closest to a misspelled ``name``, or
    ``""`` when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_settings(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """Turn ``key=value`` strings into a dict; values are read as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PluginError(f"{option} {item!r}: expected key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out[key] = value
    return out


def build(kind: str, name: str, params: Mapping[str, Any] | None = None) -> Any:
    """Load plugin ``name`` and construct it with validated ``params``."""
    info = lookup(kind, name)
    cls = load(info)
    return instantiate(cls, info, params or {})


def factory(kind: str, name: str, params: Mapping[str, Any] | None = None) -> Callable[[], Any]:
    """A constructor of fresh instances of plugin ``name``: discovery, loading and
    parameter validation happen once, here (an AM strategy is built once per job)."""
    info = lookup(kind, name)
    cls = load(info)
    first = instantiate(cls, info, params or {})
    validated = first.params

    def make() -> Any:
        obj = cls(validated)
        obj.name = info.name
        return obj

    return make


def instantiate(cls: type, info: PluginInfo, params: Mapping[str, Any]) -> Any:
    model: type[BaseModel] = cls.Params  # type: ignore[attr-defined]
    what = f"{KIND_NAMES[info.kind]} {info.name!r}"
    try:
        validated = model.model_validate(dict(params))
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(parameters)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(model.model_fields) or "none"
            hint = did_you_mean(str(err["loc"][-1]), model.model_fields) if err["loc"] else ""
            msg = f"unknown parameter (allowed: {allowed}){hint}"
        raise PluginError(f"{what}: parameter {field!r}: {msg}") from None
    try:
        obj = cls(validated)
    except Exception as e:
        raise PluginError(f"{what} from {info.dist} failed to start: {e}") from e
    obj.name = info.name
    return obj


def describe(kind: str) -> list[dict[str, str]]:
    """Name, one-line description and distribution of every plugin of ``kind``."""
    rows = []
    for info in discover(kind).values():
        try:
            doc = getattr(load(info), "description", "") or ""
        except PluginError as e:
            doc = f"(broken: {e})"
        rows.append({"name": info.name, "description": doc, "distribution": info.dist})
    return rows


#: The packages whose sources a run executes (built-in plugins included).
SOURCE_PACKAGES = ("treadle", "rm", "am", "nm", "plugins")


@functools.cache
def source_digest() -> str:
    """A digest of the Python sources of ``SOURCE_PACKAGES`` as installed, and of the
    plugin entry points, read once per process: equal for a checkout and an image built
    from it, whatever the paths. It names the code a result came from (an image's label,
    the alone-JCT cache's key)."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for name in SOURCE_PACKAGES:
        root = Path(importlib.import_module(name).__file__ or "").parent
        for path in sorted(root.rglob("*.py")):
            h.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
    for group in sorted(GROUPS.values()):
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            h.update(f"{group}:{ep.name}={ep.value}\0".encode())
    return h.hexdigest()[:16]
