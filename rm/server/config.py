"""The RM's configuration file (``python -m rm --config FILE``): queues, users, heartbeat,
limits.

A YAML mapping with five optional keys::

    heartbeat_s: 1.0                     # NM heartbeat, emulated s (--heartbeat-s wins)
    max_completed_applications: 1000     # ended applications kept (YARN's default; the
                                         #   --max-completed-applications flag wins)
    queues:                              # a workload file's queue tree syntax
      - {name: etl, weight: 2, capacity: 40, max_capacity: 100}
      - {name: adhoc, capacity: 20, queues: [{name: small}, {name: large}]}
    users:                               # a workload file's users: name -> weight, budget
      alice: {weight: 1, budget: 100}
    limits:                              # what one request may ask of the RM (RmLimits;
      max_tasks_per_job: 1000000         #   the --max-* flags win)

Without ``queues`` the RM has one leaf queue, ``default``. The queue and user entries are
a workload file's own (``treadle.yamlfile``: ``QueueFile``, ``UserFile``, the one builder
of a queue tree), checked the same way and reported the same way: one line naming the
file and the field.

The RM process reads this file, so it stands with the RM's servers; what it shares with
workload files comes from the kernel, since a service imports no tool. Writing a
workload's queues as such a file is a tool's job (``treadle.cluster.config``: what local
and container clusters hand their RM; ``treadle cluster config WORKLOAD``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from rm.core.ended import MAX_COMPLETED_APPLICATIONS
from treadle.errors import InputError
from treadle.model import QueueSpec, UserSpec
from treadle.yamlfile import (
    Name,
    QueueFile,
    Strict,
    UserFile,
    default_queues,
    queue_tree,
    read_yaml,
    validation_error,
)


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


class RmLimitsFile(Strict):
    max_tasks_per_job: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_stages_per_job: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_request_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    max_pending_tasks: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    max_parents_per_job: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None
    max_name_chars: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None


class RmConfigFile(Strict):
    """The RM's queues and users (``python -m rm --config``); as a workload file's models,
    unknown keys and quoted numbers are errors."""

    heartbeat_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None, description="NM heartbeat interval (emulated s); default 1."
    )
    max_completed_applications: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = Field(
        default=None,
        description="Ended applications kept in memory and in the state store, the first "
        f"to end dropped first; default {MAX_COMPLETED_APPLICATIONS} (YARN's).",
    )
    queues: Annotated[list[QueueFile], Field(min_length=1)] | None = Field(
        default=None, description="Top-level queues; default a single leaf 'default'."
    )
    users: dict[Name, UserFile] = Field(default_factory=dict)
    limits: RmLimitsFile | None = Field(
        default=None, description="What one request may ask of the RM (RmLimits)."
    )


FIELDS = tuple(RmConfigFile.model_fields)


@dataclass(frozen=True)
class RmConfig:
    """What the RM is configured with besides its policy and its command-line settings."""

    queues: QueueSpec = field(default_factory=default_queues)
    users: Mapping[str, UserSpec] = field(default_factory=dict)
    heartbeat_s: float | None = None
    limits: RmLimits = field(default_factory=RmLimits)
    #: Ended applications kept (``rm.core.ended``), YARN's
    #: ``yarn.resourcemanager.max-completed-applications``.
    max_completed_applications: int = MAX_COMPLETED_APPLICATIONS


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
    data = read_yaml(text, source, InputError)
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
        raise validation_error(e, source, RmConfigFile, InputError) from None
    queues = queue_tree(doc.queues, source, InputError)
    users = {n: UserSpec(n, u.weight, u.budget, tuple(u.groups)) for n, u in doc.users.items()}
    limits = RmLimits()
    if doc.limits is not None:
        given = {k: v for k, v in doc.limits.model_dump().items() if v is not None}
        limits = dataclasses.replace(limits, **given)
    kept = doc.max_completed_applications
    return RmConfig(
        queues,
        users,
        doc.heartbeat_s,
        limits,
        MAX_COMPLETED_APPLICATIONS if kept is None else kept,
    )


def _unknown_top_level(key: str, data: Mapping[Any, Any]) -> str:
    if "cluster" in data or "jobs" in data:
        return (
            f"unknown field; an RM configuration holds {_join(FIELDS)} only, not a workload "
            "(treadle cluster config WORKLOAD writes a workload's)"
        )
    close = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"expected {_join(FIELDS)}"
    return f"unknown field; {hint}"


def _join(names: Sequence[str]) -> str:
    return ", ".join(names)
