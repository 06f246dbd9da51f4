"""What treadle's YAML input files share: a workload file (``treadle.workload``) and the
RM's configuration file (``rm.server.config``).

* the models' base, ``Strict``: unknown keys are errors (a typo such as ``wieght:`` is
  not silently ignored) and numbers must be numbers (YAML gives real ones; ``"5"`` or
  ``true`` where a number belongs is refused);
* the queue and user entries, ``QueueFile`` and ``UserFile``, and ``queue_tree``, the one
  builder of a queue tree from them, with the checks that span siblings (capacities,
  duplicate names, accounts on leaves only);
* ``read_yaml``: text as plain data through the one loader (``treadle.yamlload``), a
  syntax error as one line at its line;
* ``validation_error``: pydantic's ``ValidationError`` as one line at a field path such
  as ``queues[0].weight`` (the first problem, preferring a misspelt key, with "did you
  mean" and a count of the others). A file format with union types of its own adds how
  to word them and which parts of a path are tags (``treadle.workload.errors``).

Every error is an ``InputError`` (the workload's, a ``WorkloadError``) naming the file and
the field. This stands in the kernel because the RM process reads its config file with
it and a service imports no tool: ``treadle.workload`` and ``rm.server.config`` both
build on it, neither on the other.
"""

from __future__ import annotations

import difflib
import math
import re
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic_core import ErrorDetails

from treadle import yamlload
from treadle.errors import InputError
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec
from treadle.resources import MEMORY_MB, VCORES, Resources

E = TypeVar("E", bound=InputError)
"""The error a file's problems are raised as (``InputError``, or ``WorkloadError``)."""


class Strict(BaseModel):
    # strict: YAML gives real numbers; refusing "5" or `true` where a number belongs
    # catches quoting mistakes instead of guessing.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Name = Annotated[str, StringConstraints(pattern=r"^\S+$")]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Percent = Annotated[float, Field(ge=0, le=100)]
Credits = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""Budget credits or a spending rate (credits per slot per allocation interval)."""
ResourceAmounts = dict[str, Credits]
"""A FairScheduler queue amount: resource name (vcores, memory_mb, ...) to amount."""


class QueueFile(Strict):
    """A queue; ``capacity``/``max_capacity`` are percentages of the parent."""

    name: Name
    weight: Positive = 1.0
    capacity: Percent | None = None
    max_capacity: Percent = 100.0
    queues: list[QueueFile] = Field(default_factory=list, description="Child queues.")
    budget: Credits | None = Field(
        default=None, description="A leaf queue's initial Dynamic Priority budget (credits)."
    )
    spending_rate: Credits | None = Field(
        default=None,
        description="A leaf queue's initial spending rate: credits per slot per allocation "
        "interval.",
    )
    acl_submit_applications: str | None = Field(
        default=None,
        description="Who may submit here, YARN's ACL: 'user1,user2 group1,group2', '*' "
        "everyone, ' ' nobody; inherited by the queues below (treadle.acl).",
    )
    acl_administer_queue: str | None = Field(
        default=None,
        description="Who administers this queue and those below (may submit, and read and "
        "kill others' applications), as acl_submit_applications.",
    )
    # FairScheduler properties, honoured by the fair policy (as an allocation file's).
    min_resources: ResourceAmounts | None = Field(
        default=None, description="minResources: served first until it holds this."
    )
    max_resources: ResourceAmounts | None = Field(
        default=None, description="maxResources: never holds more (resources left out: no cap)."
    )
    max_running_apps: Annotated[int, Field(ge=0)] | None = None
    max_am_share: Annotated[float, Field(ge=0, le=1)] | None = None
    scheduling_policy: Literal["fifo", "fair", "drf"] | None = None
    min_share_preemption_timeout_s: Credits | None = None
    fair_share_preemption_timeout_s: Credits | None = None
    fair_share_preemption_threshold: Annotated[float, Field(ge=0, le=1)] | None = None
    allow_preemption_from: bool | None = None
    # CapacityScheduler leaf properties (the capacity policy honours them).
    user_limit_factor: Positive | None = Field(
        default=None, description="A user may hold up to this many times the leaf's capacity."
    )
    minimum_user_limit_percent: Annotated[float, Field(gt=0, le=100)] | None = Field(
        default=None, description="Each active user's floor, a percentage of the leaf."
    )
    maximum_applications: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="Submissions past this many applications are refused."
    )
    maximum_am_resource_percent: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="Application masters may hold this fraction of the leaf."
    )
    ordering_policy: Literal["fifo", "fair"] | None = Field(
        default=None, description="The order of the leaf's applications."
    )


class UserFile(Strict):
    weight: Positive = 1.0
    budget: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    groups: list[Name] = Field(
        default_factory=list, description="The user's groups, as queue ACLs name them."
    )
    max_running_apps: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="The user's maxRunningApps (the fair policy)."
    )


# --------------------------------------------------------------------------------------
# The queue tree


def default_queues() -> QueueSpec:
    """The tree of a file without ``queues``: one leaf, ``default``."""
    return QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))


def queue_tree(declared: Sequence[QueueFile] | None, source: str, error: type[E]) -> QueueSpec:
    """The tree under ``root`` that ``declared`` (a file's ``queues``) describes; without
    it, one leaf queue, ``default``. A problem is an ``error`` naming ``source`` and the
    entry (``queues[0].queues[1].name``).

    The root is implicit, unless the only entry is named ``root`` (as a Fair Scheduler
    file's ``<queue name="root">``), to give the root's ACLs; it takes nothing else."""
    if declared is None:
        return default_queues()
    if len(declared) == 1 and declared[0].name == ROOT_QUEUE:
        top = declared[0]
        extra = top.model_fields_set - {"name", "queues", *ROOT_FIELDS}
        if extra or not top.queues:
            problem = f"takes no {sorted(extra)[0]}" if extra else "needs its queues"
            raise error(source, "queues[0]", f"the root {problem} (only ACLs and queues)")
        children = _queue_level(top.queues, "queues[0].queues", source, error, set())
        return QueueSpec(
            ROOT_QUEUE,
            children=children,
            submit_acl=top.acl_submit_applications,
            admin_acl=top.acl_administer_queue,
        )
    return QueueSpec(ROOT_QUEUE, children=_queue_level(declared, "queues", source, error, set()))


ROOT_FIELDS = ("acl_submit_applications", "acl_administer_queue")
"""What an explicit ``root`` entry may set besides its queues."""


def _queue_level(
    declared: Sequence[QueueFile],
    where: str,
    source: str,
    error: type[E],
    seen: set[str],
) -> tuple[QueueSpec, ...]:
    total = sum(q.capacity or 0.0 for q in declared)
    if total > 100 + 1e-9:
        raise error(source, where, f"sibling capacities sum to {total:g}%, more than 100%")
    return tuple(_queue(q, f"{where}[{i}]", source, error, seen) for i, q in enumerate(declared))


def _queue(q: QueueFile, where: str, source: str, error: type[E], seen: set[str]) -> QueueSpec:
    if q.name == ROOT_QUEUE:
        raise error(source, f"{where}.name", f"{ROOT_QUEUE!r} is the implicit top of the tree")
    if q.name in seen:
        raise error(source, f"{where}.name", f"duplicate queue name {q.name!r}")
    seen.add(q.name)
    if q.capacity is not None and q.capacity > q.max_capacity:
        raise error(
            source,
            f"{where}.capacity",
            f"capacity {q.capacity:g} exceeds max_capacity {q.max_capacity:g}",
        )
    children = _queue_level(q.queues, f"{where}.queues", source, error, seen)
    if children and (q.budget is not None or q.spending_rate is not None):
        key = "budget" if q.budget is not None else "spending_rate"
        raise error(source, f"{where}.{key}", "only a leaf queue has an account")
    return QueueSpec(
        q.name,
        q.weight,
        q.capacity,
        q.max_capacity,
        children,
        budget=q.budget,
        spending_rate=q.spending_rate,
        submit_acl=q.acl_submit_applications,
        admin_acl=q.acl_administer_queue,
        **_fair_properties(q),
        user_limit_factor=q.user_limit_factor,
        minimum_user_limit_percent=q.minimum_user_limit_percent,
        maximum_applications=q.maximum_applications,
        maximum_am_resource_percent=q.maximum_am_resource_percent,
        ordering_policy=q.ordering_policy,
    )


def _fair_properties(q: QueueFile) -> dict[str, typing.Any]:
    """The QueueSpec fields of ``q``'s FairScheduler properties (a max leaves the
    resources it does not name uncapped)."""
    out: dict[str, typing.Any] = {
        k: getattr(q, k)
        for k in (
            "max_running_apps",
            "max_am_share",
            "scheduling_policy",
            "min_share_preemption_timeout_s",
            "fair_share_preemption_timeout_s",
            "fair_share_preemption_threshold",
            "allow_preemption_from",
        )
    }
    if q.min_resources is not None:
        out["min_resources"] = Resources(q.min_resources)
    if q.max_resources is not None:
        out["max_resources"] = Resources({VCORES: math.inf, MEMORY_MB: math.inf, **q.max_resources})
    return out


# --------------------------------------------------------------------------------------
# YAML, and pydantic's errors, as one line


def read_yaml(text: str, source: str, error: type[E]) -> object:
    """``text`` as plain data, duplicate keys refused (``treadle.yamlload``)."""
    try:
        return yamlload.load(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, source, error) from None


def yaml_error(e: yaml.YAMLError, source: str, error: type[E]) -> E:
    """A YAML syntax error as one line, at the line it names."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}" if mark else None
        parts = [p for p in (e.context, e.problem) if p]
        return error(source, where, "invalid YAML: " + ", ".join(parts))
    return error(source, None, f"invalid YAML: {e}")


Loc = Sequence[int | str]
#: How a file format words an error of its own union types (None: as any other).
Describe = Callable[[ErrorDetails], str | None]
#: Whether a part of an error's location is a union member's tag, not a key of the
#: user's document (before, previous, part).
IsTag = Callable[[int | str | None, int | str | None, int | str], bool]


def _no_words(error: ErrorDetails) -> str | None:
    return None


def _no_tags(before: int | str | None, previous: int | str | None, part: int | str) -> bool:
    return False


def validation_error(
    err: ValidationError,
    source: str,
    root: type[BaseModel],
    error: type[E],
    describe: Describe = _no_words,
    is_tag: IsTag = _no_tags,
) -> E:
    """The first problem of ``err`` (raised validating ``root``) as one line."""
    errors = err.errors(include_url=False)
    # A misspelt key usually also makes a required one "missing": report the cause.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    message = describe(first) or _describe(first, root)
    loc = tuple(first["loc"])
    if first["type"] in ("union_tag_invalid", "union_tag_not_found") and isinstance(
        first.get("input"), dict
    ):
        loc += (str(first.get("ctx", {}).get("discriminator", "kind")).strip("'"),)
    if len(errors) > 1:
        more = len(errors) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return error(source, loc_to_path(loc, is_tag) or None, message)


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def loc_to_path(loc: Loc, is_tag: IsTag = _no_tags) -> str:
    """An error's location as the user writes it: ``jobs[2].stages[0].name``. A dict's
    ``[key]`` marker and tags (``is_tag``, or a name that starts with ``~``) drop out."""
    out = ""
    previous: int | str | None = None
    before: int | str | None = None
    for part in loc:
        tag = is_tag(before, previous, part) or (isinstance(part, str) and part.startswith("~"))
        before, previous = previous, part
        if tag or part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _describe(error: ErrorDetails, root: type[BaseModel]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field" + _did_you_mean(error["loc"], root)
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping, got {brief(value)}"
    if kind == "string_pattern_mismatch":
        return f"must be a non-empty name without spaces, got {value!r}"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if "[key]" in error["loc"]:
        return f"keys must be names, got {error['loc'][-2]!r}"
    message = error["msg"][:1].lower() + error["msg"][1:]
    if isinstance(value, str | int | float | bool) or value is None:
        message += f", got {value!r}"
    return message


def brief(value: object) -> str:
    """``repr(value)``, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _did_you_mean(loc: Loc, root: type[BaseModel]) -> str:
    allowed = sorted({f for m in _models_at(loc[:-1], root) for f in m.model_fields})
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _models_at(loc: Loc, root: type[BaseModel]) -> set[type[BaseModel]]:
    """The models an error location can point into (for spelling suggestions)."""
    models: set[type[BaseModel]] = {root}
    for part in loc:
        # List indices, dict keys and union tags are not fields: they keep the models.
        fields = [
            m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields
        ]
        if fields:
            models = {m for f in fields for m in _models_in(f.annotation)}
        elif isinstance(part, str):  # a union member's ``kind`` tag narrows to its model
            models = {m for m in models if _kind_of(m) == part} or models
    return models


def _kind_of(model: type[BaseModel]) -> object:
    kind = model.model_fields.get("kind")
    args = typing.get_args(kind.annotation) if kind else ()
    return args[0] if args else None


def _models_in(annotation: object) -> set[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}
