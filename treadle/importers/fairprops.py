"""The FairScheduler queue properties of an allocation file that treadle honours (the
``fair`` policy's rules), read as ``AllocationFileLoaderService`` reads them.

Amounts (``minResources``, ``maxResources``, ``queueMaxResourcesDefault``) as Hadoop's
``FairSchedulerConfiguration.parseResourceConfigValue``: ``"1024 mb, 2 vcores"`` (both
needed), ``"memory-mb=1024, vcores=2"`` (others: 0 in a min, unbounded in a max),
``"50%"`` (of every resource), ``"memory-mb=50%, vcores=25%"`` or ``"50% memory, 25%
cpu"``: percentages of the cluster. Timeouts are seconds; ``schedulingPolicy`` (or the old
``schedulingMode``) is fifo, fair or drf (fifo on a leaf only). File-wide defaults:
``queueMaxAppsDefault`` (every queue), ``queueMaxAMShareDefault`` (every leaf; 0.5 as in
Hadoop, -1 for none), ``defaultQueueSchedulingPolicy``, the ``default...Preemption...``
settings (on the root, inherited down), ``userMaxAppsDefault`` and ``<user>``'s
``maxRunningApps``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from treadle.model import ClusterPercent, QueueSpec
from treadle.resources import MEMORY_MB, VCORES, Resources

#: Hadoop's ``queueMaxAMShareDefault``.
DEFAULT_MAX_AM_SHARE = 0.5
_POLICIES = ("fifo", "fair", "drf")
_NAMES = {"memory-mb": MEMORY_MB, "memory": MEMORY_MB, "vcores": VCORES, "cpu": VCORES}


class ResourceFormatError(ValueError):
    """A resource amount in none of Hadoop's formats."""


def parse_resources(text: str, *, unbounded: bool = False) -> Resources | ClusterPercent:
    """An amount as Hadoop writes it (module docstring); ``unbounded``: resources a new-style
    value leaves out have no limit (a max) rather than 0 (a min)."""
    val = text.strip().lower()
    if not val:
        raise ResourceFormatError("an empty amount")
    if "=" in val:
        return _new_style(val, unbounded)
    if "%" in val:
        return _old_percent(val)
    return _old_style(val)


def _number(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ResourceFormatError(f"{s!r} is not a number") from None
    if not v >= 0 or math.isinf(v):
        raise ResourceFormatError(f"{s!r} is not a finite amount >= 0")
    return v


def _new_style(val: str, unbounded: bool) -> Resources | ClusterPercent:
    given: dict[str, str] = {}
    for part in val.split(","):
        name, sep, amount = part.partition("=")
        key = _NAMES.get(name.strip())
        if not sep or key is None:
            raise ResourceFormatError(f"{part.strip()!r}: expected memory-mb=... or vcores=...")
        given[key] = amount.strip()
    if all(a.endswith("%") for a in given.values()):
        return ClusterPercent(tuple((k, _number(a[:-1].strip())) for k, a in given.items()))
    if any(a.endswith("%") for a in given.values()):
        raise ResourceFormatError("mixes percentages and amounts")
    amounts = {k: _number(a) for k, a in given.items()}
    if unbounded:
        for k in (MEMORY_MB, VCORES):
            amounts.setdefault(k, math.inf)
    return Resources(amounts)


def _old_percent(val: str) -> ClusterPercent:
    whole = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", val)
    if whole:
        return ClusterPercent((("*", _number(whole.group(1))),))
    out: list[tuple[str, float]] = []
    for name in ("memory", "cpu"):
        m = re.search(r"(\d+(?:\.\d+)?)\s*%\s*" + name, val)
        if m is None:
            raise ResourceFormatError(f"missing the percentage of {name}")
        out.append((_NAMES[name], _number(m.group(1))))
    return ClusterPercent(tuple(out))


def _old_style(val: str) -> Resources:
    found: dict[str, float] = {}
    for unit, key in (("mb", MEMORY_MB), ("vcores", VCORES)):
        m = re.search(r"(\d+(?:\.\d+)?)\s*" + unit, val)
        if m is None:
            raise ResourceFormatError(f"missing resource: {unit}")
        found[key] = _number(m.group(1))
    return Resources(found)


# ------------------------------------------------------------------------ a queue's
def _seconds(text: str) -> float:
    return _number(text.strip())


def _count(text: str) -> int:
    v = _number(text.strip())
    if v != int(v):
        raise ResourceFormatError(f"{text.strip()!r} is not a whole number")
    return int(v)


def _share(text: str) -> float:
    v = float(text.strip())
    if v != -1 and not 0 <= v <= 1:
        raise ResourceFormatError(f"{text.strip()!r}: expected -1 or a fraction in [0, 1]")
    return v


def _threshold(text: str) -> float:
    v = float(text.strip())
    if not 0 <= v <= 1:
        raise ResourceFormatError(f"{text.strip()!r}: expected a fraction in [0, 1]")
    return v


def _policy(text: str) -> str:
    v = text.strip().lower()
    if v not in _POLICIES:
        raise ResourceFormatError(f"{text.strip()!r}: expected one of {', '.join(_POLICIES)}")
    return v


def _allow(text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise ResourceFormatError(f"{text.strip()!r}: expected true or false")
    return v == "true"


#: Queue elements treadle honours: the QueueSpec field each sets and how it is read.
QUEUE_PROPERTIES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "minResources": ("min_resources", parse_resources),
    "maxResources": ("max_resources", lambda t: parse_resources(t, unbounded=True)),
    "maxRunningApps": ("max_running_apps", _count),
    "maxAMShare": ("max_am_share", _share),
    "schedulingPolicy": ("scheduling_policy", _policy),
    "schedulingMode": ("scheduling_policy", _policy),
    "minSharePreemptionTimeout": ("min_share_preemption_timeout_s", _seconds),
    "fairSharePreemptionTimeout": ("fair_share_preemption_timeout_s", _seconds),
    "fairSharePreemptionThreshold": ("fair_share_preemption_threshold", _threshold),
    "allowPreemptionFrom": ("allow_preemption_from", _allow),
}

#: File-wide defaults: element -> (QueueSpec field, read, which queues: root/leaves/all).
DEFAULTS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "queueMaxAppsDefault": ("max_running_apps", _count, "all"),
    "queueMaxAMShareDefault": ("max_am_share", _share, "leaves"),
    "queueMaxResourcesDefault": (
        "max_resources",
        lambda t: parse_resources(t, unbounded=True),
        "leaves",
    ),
    "defaultQueueSchedulingPolicy": ("scheduling_policy", _policy, "all"),
    "defaultQueueSchedulingMode": ("scheduling_policy", _policy, "all"),
    "defaultFairSharePreemptionTimeout": ("fair_share_preemption_timeout_s", _seconds, "root"),
    "fairSharePreemptionTimeout": ("fair_share_preemption_timeout_s", _seconds, "root"),
    "defaultMinSharePreemptionTimeout": ("min_share_preemption_timeout_s", _seconds, "root"),
    "defaultFairSharePreemptionThreshold": ("fair_share_preemption_threshold", _threshold, "root"),
    "userMaxAppsDefault": ("user_max_apps_default", _count, "root"),
}


def apply_defaults(
    root: QueueSpec, defaults: Mapping[str, tuple[Any, str]], users: tuple[tuple[str, int], ...]
) -> QueueSpec:
    """``root``'s tree with the file-wide defaults (field -> (value, scope)) filled in where
    a queue sets nothing, ``queueMaxAMShareDefault`` 0.5 unless the file says, and the
    user limits on the root. A fifo policy on a queue with children is an error."""
    defaults = {"max_am_share": (DEFAULT_MAX_AM_SHARE, "leaves"), **defaults}

    def fill(q: QueueSpec, is_root: bool) -> QueueSpec:
        changes: dict[str, Any] = {}
        for field, (value, scope) in defaults.items():
            applies = {"all": True, "root": is_root, "leaves": q.is_leaf and not is_root}[scope]
            if applies and getattr(q, field) is None:
                changes[field] = value
        if changes.get("max_am_share", q.max_am_share) == -1:
            changes["max_am_share"] = None  # -1: no limit
        kids = tuple(fill(c, False) for c in q.children)
        return dataclasses.replace(q, children=kids, **changes)

    out = fill(root, True)
    return dataclasses.replace(out, user_max_running_apps=users) if users else out


def fifo_parent(q: QueueSpec, path: str = "root") -> str | None:
    """The path of a queue with children whose policy is fifo (Hadoop refuses it), if any."""
    if q.children and q.scheduling_policy == "fifo":
        return path
    for c in q.children:
        found = fifo_parent(c, f"{path}.{c.name}")
        if found is not None:
            return found
    return None


def _amount(a: Resources | ClusterPercent) -> str:
    if isinstance(a, ClusterPercent):
        return ", ".join(f"{'all' if k == '*' else k} {v:g}%" for k, v in a.percent)
    return ", ".join(f"{k} {v:g}" for k, v in sorted(a.items()) if not math.isinf(v))


def describe_fair(q: QueueSpec) -> list[str]:
    """The honoured properties of ``q`` for ``treadle queues`` (the default AM share
    left out)."""
    out: list[str] = []
    if q.min_resources is not None:
        out.append(f"min {_amount(q.min_resources)}")
    if q.max_resources is not None:
        out.append(f"max {_amount(q.max_resources)}")
    if q.max_running_apps is not None:
        out.append(f"max running apps {q.max_running_apps}")
    if q.max_am_share is not None and q.max_am_share != DEFAULT_MAX_AM_SHARE:
        out.append(f"AM share {q.max_am_share:g}")
    if q.scheduling_policy is not None:
        out.append(f"policy {q.scheduling_policy}")
    for label, v in (
        ("min-share preemption after", q.min_share_preemption_timeout_s),
        ("fair-share preemption after", q.fair_share_preemption_timeout_s),
    ):
        if v is not None:
            out.append(f"{label} {v:g}s")
    if q.fair_share_preemption_threshold is not None:
        out.append(f"fair-share threshold {q.fair_share_preemption_threshold:g}")
    if q.allow_preemption_from is False:
        out.append("no preemption from")
    if q.user_max_apps_default is not None:
        out.append(f"user max apps {q.user_max_apps_default}")
    out += [f"user {u} max apps {n}" for u, n in q.user_max_running_apps]
    return out
