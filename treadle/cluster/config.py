"""The RM's configuration file (``python -m rm --config FILE``): queues, users, heartbeat,
limits.

A YAML mapping with four optional keys::

    heartbeat_s: 1.0                     # NM heartbeat, emulated s (--heartbeat-s wins)
    queues:                              # a workload file's queue tree syntax
      - {name: etl, weight: 2, capacity: 40, max_capacity: 100}
      - {name: adhoc, capacity: 20, queues: [{name: small}, {name: large}]}
    users:                               # a workload file's users: name -> weight, budget
      alice: {weight: 1, budget: 100}
    limits:                              # what one request may ask of the RM (RmLimits;
      max_tasks_per_job: 1000000         #   the --max-* flags win)

Without ``queues`` the RM has one leaf queue, ``default``. The queue and user entries are
the workload schema's own models (``QueueFile``, ``UserFile``), checked the same way and
reported the same way: one line naming the file and the field. ``rm_config_for`` takes a
workload's queues, users and heartbeat, and ``dump_rm_config`` writes them as such a file
(what local and container clusters hand their RM; ``treadle cluster config WORKLOAD``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from treadle.errors import InputError
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec, UserSpec, Workload
from treadle.workload import QueueFile, UserFile, _from_validation_error, yamlload

UserName = Annotated[str, StringConstraints(pattern=r"^\S+$")]


@dataclass(frozen=True)
class RmLimits:
    """What the RM accepts, checked before a request changes anything; a request over a
    limit is refused RESOURCE_EXHAUSTED naming it. The defaults pass every shipped
    workload and trace with room to spare (the largest job, Alibaba 2017's, has 66,632
    tasks; the most stages, 156; all of Alibaba 2017 is 11.9 million tasks)."""

    max_tasks_per_job: int = 1_000_000
    max_stages_per_job: int = 10_000
    #: The gRPC receive limit of the RM's server, and the size of a decoded submission:
    #: room for the largest job the other limits allow (a million durations are 8 MB),
    #: and small enough that decoding one costs the RM a fraction of a second.
    max_request_bytes: int = 16 * 1024 * 1024
    #: The tasks of running applications not yet done, with the submission's.
    max_pending_tasks: int = 20_000_000
    #: The dependencies of a job's stages in all (parents named): ordering a job's stages
    #: costs ~20 us per dependency (100,000: 1.7 s, off the RM's event loop).
    max_parents_per_job: int = 100_000
    #: The longest name in a submission (job, user, queue, stages and their parents, ask
    #: strategy): every report, list and event repeats them.
    max_name_chars: int = 1024


LIMITS = tuple(f.name for f in dataclasses.fields(RmLimits))


class RmLimitsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_tasks_per_job: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_stages_per_job: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_request_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    max_pending_tasks: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_parents_per_job: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None
    max_name_chars: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None


class RmConfigFile(BaseModel):
    """The RM's queues and users (``python -m rm --config``)."""

    # As a workload file's models: unknown keys and quoted numbers are errors.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    heartbeat_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None, description="NM heartbeat interval (emulated s); default 1."
    )
    queues: Annotated[list[QueueFile], Field(min_length=1)] | None = Field(
        default=None, description="Top-level queues; default a single leaf 'default'."
    )
    users: dict[UserName, UserFile] = Field(default_factory=dict)
    limits: RmLimitsFile | None = Field(
        default=None, description="What one request may ask of the RM (RmLimits)."
    )


FIELDS = tuple(RmConfigFile.model_fields)


def _default_queues() -> QueueSpec:
    return QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))


@dataclass(frozen=True)
class RmConfig:
    """What the RM is configured with besides its policy and its command-line settings."""

    queues: QueueSpec = field(default_factory=_default_queues)
    users: Mapping[str, UserSpec] = field(default_factory=dict)
    heartbeat_s: float | None = None
    limits: RmLimits = field(default_factory=RmLimits)


# --------------------------------------------------------------------------------------
# Reading


def load_rm_config(path: str | Path) -> RmConfig:
    """Read and check an RM configuration file; every problem is an InputError naming the
    file (and the field)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(source, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise InputError(source, None, f"cannot read: {e.strerror or e}") from None
    return parse_rm_config(text, source)


def parse_rm_config(text: str, source: str) -> RmConfig:
    data = _parse_yaml(text, source)
    if data is None:
        raise InputError(source, None, f"the RM configuration is empty (keys: {_join(FIELDS)})")
    if not isinstance(data, dict):
        raise InputError(source, None, f"the top level must be a mapping ({_join(FIELDS)})")
    for key in data:
        if key not in FIELDS:
            raise InputError(source, str(key), _unknown_top_level(str(key), data))
    try:
        doc = RmConfigFile.model_validate(data)
    except ValidationError as e:
        raise _from_validation_error(e, source) from None
    queues = _default_queues()
    if doc.queues is not None:
        queues = QueueSpec(ROOT_QUEUE, children=_queue_level(doc.queues, "queues", source, set()))
    users = {name: UserSpec(name, u.weight, u.budget) for name, u in doc.users.items()}
    limits = RmLimits()
    if doc.limits is not None:
        given = {k: v for k, v in doc.limits.model_dump().items() if v is not None}
        limits = dataclasses.replace(limits, **given)
    return RmConfig(queues, users, doc.heartbeat_s, limits)


def _unknown_top_level(key: str, data: Mapping[Any, Any]) -> str:
    if "cluster" in data or "jobs" in data:
        return (
            f"unknown field; an RM configuration holds {_join(FIELDS)} only, not a workload "
            "(treadle cluster config WORKLOAD writes a workload's)"
        )
    close = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"expected {_join(FIELDS)}"
    return f"unknown field; {hint}"


def _queue_level(
    declared: Sequence[QueueFile], where: str, source: str, seen: set[str]
) -> tuple[QueueSpec, ...]:
    """The checks a workload file's queue tree gets (beyond its schema)."""
    total = sum(q.capacity or 0.0 for q in declared)
    if total > 100 + 1e-9:
        raise InputError(source, where, f"sibling capacities sum to {total:g}%, more than 100%")
    out = []
    for i, q in enumerate(declared):
        at = f"{where}[{i}]"
        if q.name == ROOT_QUEUE:
            raise InputError(
                source, f"{at}.name", f"{ROOT_QUEUE!r} is the implicit top of the tree"
            )
        if q.name in seen:
            raise InputError(source, f"{at}.name", f"duplicate queue name {q.name!r}")
        seen.add(q.name)
        if q.capacity is not None and q.capacity > q.max_capacity:
            raise InputError(
                source,
                f"{at}.capacity",
                f"capacity {q.capacity:g} exceeds max_capacity {q.max_capacity:g}",
            )
        children = _queue_level(q.queues, f"{at}.queues", source, seen)
        if children and (q.budget is not None or q.spending_rate is not None):
            key = "budget" if q.budget is not None else "spending_rate"
            raise InputError(source, f"{at}.{key}", "only a leaf queue has an account")
        out.append(
            QueueSpec(
                q.name,
                q.weight,
                q.capacity,
                q.max_capacity,
                children,
                budget=q.budget,
                spending_rate=q.spending_rate,
            )
        )
    return tuple(out)


def _parse_yaml(text: str, source: str) -> object:
    try:
        return yamlload.load(text)  # the workloads' loader: duplicate keys refused
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        parts = [p for p in (e.context, e.problem) if p]
        where = f"line {mark.line + 1}" if mark else None
        raise InputError(source, where, "invalid YAML: " + ", ".join(parts)) from None
    except yaml.YAMLError as e:
        raise InputError(source, None, f"invalid YAML: {e}") from None


def _join(names: Sequence[str]) -> str:
    return ", ".join(names)


# --------------------------------------------------------------------------------------
# Writing


def rm_config_for(workload: Workload) -> RmConfig:
    """``workload``'s queues, users and heartbeat, for the RM of a cluster of its shape."""
    return RmConfig(workload.queues, dict(workload.users), workload.cluster.heartbeat_s)


def _queue_doc(q: QueueSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": q.name, "weight": q.weight}
    if q.capacity is not None:
        doc["capacity"] = q.capacity
    doc["max_capacity"] = q.max_capacity
    if q.children:
        doc["queues"] = [_queue_doc(c) for c in q.children]
    for key in ("budget", "spending_rate"):  # a leaf queue's initial account
        if getattr(q, key) is not None:
            doc[key] = getattr(q, key)
    return doc


def dump_rm_config(config: RmConfig, comment: str | None = None) -> str:
    """``config`` as an RM configuration file (``load_rm_config`` reads it back)."""
    doc: dict[str, Any] = {}
    if config.heartbeat_s is not None:
        doc["heartbeat_s"] = config.heartbeat_s
    if config.queues.name == ROOT_QUEUE and config.queues.children:
        doc["queues"] = [_queue_doc(c) for c in config.queues.children]
    doc["users"] = {
        name: {"weight": u.weight, **({"budget": u.budget} if u.budget is not None else {})}
        for name, u in config.users.items()
    }
    if config.limits != RmLimits():
        doc["limits"] = dataclasses.asdict(config.limits)
    head = "".join(f"# {line}\n" for line in (comment or "").splitlines())
    return head + yaml.safe_dump(doc, sort_keys=False)
