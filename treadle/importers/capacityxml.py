"""A Capacity Scheduler ``capacity-scheduler.xml`` as an ``ImportedQueues``.

The file is a Hadoop configuration: ``<property>`` elements with a ``<name>`` and a
``<value>`` (or ``name=`` and ``value=`` attributes), the last of a name winning. The
tree grows from ``yarn.scheduler.capacity.root.queues``, each listed queue's own
``<path>.queues`` naming its children, as ``CapacitySchedulerConfiguration`` reads it.
What maps, for the queue at path ``P`` (``yarn.scheduler.capacity.P.<key>``):

- ``capacity``: a percentage of the parent (0 when not given, the root's is 100); the
  children of a queue must sum to 100 (within YARN's precision), unless all are 0 under
  a parent of capacity 0;
- ``maximum-capacity``: a percentage, 100 by default (``-1`` too), at least ``capacity``;
- ``state``: ``RUNNING`` or ``STOPPED`` (a stopped queue, and what is under it, takes no
  submissions); ``acl_submit_applications`` and ``acl_administer_queue``: who may submit,
  who administers (``treadle.acl``; the root's default is everyone, every other queue's
  nobody);
- ``yarn.scheduler.capacity.queue-mappings`` (``u:user:queue``, ``u:%user:%user``,
  ``u:%user:queue``) and ``queue-mappings-override.enable``: placement.

- ``user-limit-factor``, ``minimum-user-limit-percent``, ``maximum-applications``,
  ``maximum-am-resource-percent`` (a fraction, 0..1) and ``ordering-policy`` (``fifo`` or
  ``fair``) of a queue: its ``QueueSpec`` fields, which the ``capacity`` policy honours.

- the scheduler-wide ``maximum-applications`` and ``maximum-am-resource-percent``: the
  defaults of the leaves that set neither (a leaf's maximum: the system's times its
  absolute capacity, rounded down).

Everything else (absolute ``[memory=...]`` or weight ``2w`` capacities, group mappings,
properties that are not the Capacity Scheduler's) is recorded as not modelled.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from treadle.importers.yarnqueues import (
    CAPACITY,
    ImportedQueues,
    PlacementRule,
    QueueConfigError,
    Unmodelled,
    parse_float,
)
from treadle.model import QUEUE_RUNNING, QUEUE_STOPPED, ROOT_QUEUE, QueueSpec

PREFIX = "yarn.scheduler.capacity."
#: A leaf's properties the capacity policy honours, and their ``QueueSpec`` fields.
LEAF_KEYS = (
    ("user-limit-factor", "user_limit_factor"),
    ("minimum-user-limit-percent", "minimum_user_limit_percent"),
    ("maximum-applications", "maximum_applications"),
    ("maximum-am-resource-percent", "maximum_am_resource_percent"),
    ("ordering-policy", "ordering_policy"),
)
MAPPINGS, OVERRIDE = "queue-mappings", "queue-mappings-override.enable"
MAPPED_KEYS = (
    "queues",
    "capacity",
    "maximum-capacity",
    "state",
    "acl_submit_applications",
    "acl_administer_queue",
    *(key for key, _ in LEAF_KEYS),
)
PRECISION = 0.0005 * 100  # CapacitySchedulerConfiguration's, on percentages


def read_properties(root: ET.Element, source: str) -> dict[str, str]:
    """A Hadoop configuration's properties, name -> value (the last one wins). Values are
    kept as written (an ACL's leading space matters); numbers are read trimmed."""
    props: dict[str, str] = {}
    for i, el in enumerate(root):
        where = f"<property> #{i + 1}"
        if el.tag == "include" or el.tag.endswith("}include"):
            raise QueueConfigError(source, where, "XInclude is not supported; inline the file")
        if el.tag != "property":
            raise QueueConfigError(source, f"<{el.tag}>", "expected <property> elements")
        name = el.get("name") or el.findtext("name")
        value = el.get("value")
        if value is None:
            value = el.findtext("value")
        if not name or not name.strip():
            raise QueueConfigError(source, where, "a property without a <name>")
        props[name.strip()] = value or ""
    return props


@dataclass
class _Reader:
    source: str
    props: dict[str, str]
    used: set[str] = field(default_factory=set)
    notes: list[Unmodelled] = field(default_factory=list)

    def get(self, path: str, key: str) -> str | None:
        name = f"{PREFIX}{path}.{key}"
        if name in self.props:
            self.used.add(name)
            return self.props[name]
        return None

    def queue(self, path: str, name: str, capacity: float) -> QueueSpec:
        max_text = self.get(path, "maximum-capacity")
        max_capacity = 100.0
        if max_text is not None and max_text.strip() != "-1":
            max_capacity = self.percent(max_text, path, "maximum-capacity")
        if capacity > max_capacity:
            raise self.error(
                path, "capacity", f"{capacity:g} exceeds maximum-capacity {max_capacity:g}"
            )
        return QueueSpec(
            name,
            capacity=capacity,
            max_capacity=max_capacity,
            **self.common(path, capacity),
            **self.leaf_limits(path),
        )

    def leaf_limits(self, path: str) -> dict[str, Any]:
        """The queue's user limits, application limits and ordering (``LEAF_KEYS``)."""
        out: dict[str, Any] = {}
        for key, attr in LEAF_KEYS:
            if self.get(path, key) is not None:
                out.update(self.leaf_limits_of(f"{PREFIX}{path}.{key}", key, attr))
        return out

    def leaf_limits_of(self, name: str, key: str, attr: str) -> dict[str, Any]:
        """Property ``name`` (a ``LEAF_KEYS`` ``key``), checked, as ``{attr: value}``."""
        text = self.props[name]
        if key == "ordering-policy":
            value: Any = text.strip().lower()
            if value not in ("fifo", "fair"):
                raise QueueConfigError(
                    self.source, name, f"expected fifo or fair, got {text.strip()!r}"
                )
        elif key == "maximum-applications":
            number = parse_float(text, self.source, name)
            if number < 0 or number != int(number):
                raise QueueConfigError(
                    self.source, name, f"expected a whole number >= 0, got {text!r}"
                )
            value = int(number)
        else:
            value = parse_float(text, self.source, name)
            high = {"maximum-am-resource-percent": 1.0, "minimum-user-limit-percent": 100.0}
            if (
                value < 0
                or value > high.get(key, math.inf)
                or (value == 0 and key != "maximum-am-resource-percent")
            ):
                raise QueueConfigError(self.source, name, f"out of range: {text.strip()!r}")
        return {attr: value}

    def common(self, path: str, capacity: float) -> dict[str, Any]:
        """A queue's fields that the root has too: state, ACL, children, the rest."""
        state = (self.get(path, "state") or QUEUE_RUNNING).strip().upper()
        if state not in (QUEUE_RUNNING, QUEUE_STOPPED):
            raise self.error(path, "state", f"expected RUNNING or STOPPED, got {state!r}")
        names = self.child_names(path)
        return {
            "state": state,
            "submit_acl": self.get(path, "acl_submit_applications"),
            "admin_acl": self.get(path, "acl_administer_queue"),
            "unmodelled": self.own_unmodelled(path, set(names)),
            "children": self.children(path, capacity, names),
        }

    def child_names(self, path: str) -> list[str]:
        listed = self.get(path, "queues")
        names = [n.strip() for n in (listed or "").split(",") if n.strip()]
        for n in names:
            if "." in n or names.count(n) > 1:
                problem = "contains a period" if "." in n else "is listed twice"
                raise self.error(path, "queues", f"queue name {n!r} {problem}")
        return names

    def children(self, path: str, capacity: float, names: list[str]) -> tuple[QueueSpec, ...]:
        capacities = [self.capacity(f"{path}.{n}") for n in names]
        total = sum(capacities)
        if names and abs(total - 100) > PRECISION and not (total == 0 and capacity == 0):
            raise self.error(
                path, "queues", f"the capacities of {', '.join(names)} sum to {total:g}, not 100"
            )
        pairs = zip(names, capacities, strict=True)
        return tuple(self.queue(f"{path}.{n}", n, c) for n, c in pairs)

    def capacity(self, path: str) -> float:
        text = self.get(path, "capacity")
        if text is None:
            return 0.0
        text = text.strip()
        if text.startswith("[") or text.lower().endswith("w"):
            self.notes.append(Unmodelled("capacity", text, path))
            return 0.0
        return self.percent(text, path, "capacity")

    def percent(self, text: str, path: str, key: str) -> float:
        value = parse_float(text, self.source, f"{PREFIX}{path}.{key}")
        if value > 100:
            raise self.error(path, key, f"a percentage of at most 100, got {text!r}")
        return value

    def own_unmodelled(self, path: str, children: set[str]) -> tuple[tuple[str, str], ...]:
        """The properties of the queue at ``path`` itself (not of its ``children``) that
        treadle does not map."""
        head = f"{PREFIX}{path}."
        out = []
        for name, value in self.props.items():
            key = name.removeprefix(head)
            child = key.partition(".")[0] if "." in key else None
            if name.startswith(head) and key not in MAPPED_KEYS and child not in children:
                self.used.add(name)
                self.notes.append(Unmodelled(key, value.strip(), path))
                out.append((key, value.strip()))
        return tuple(out)

    def error(self, path: str, key: str, message: str) -> QueueConfigError:
        return QueueConfigError(self.source, f"{PREFIX}{path}.{key}", message)


def read_capacity(root: ET.Element, source: str) -> ImportedQueues:
    """The queue tree, placement and unmodelled properties of a capacity-scheduler.xml."""
    props = read_properties(root, source)
    reader = _Reader(source, props)
    for key in ("capacity", "maximum-capacity"):  # the root's are 100, whatever is set
        reader.get(ROOT_QUEUE, key)
    tree = QueueSpec(ROOT_QUEUE, capacity=100.0, **reader.common(ROOT_QUEUE, 100.0))
    if not tree.children:
        raise QueueConfigError(source, f"{PREFIX}root.queues", "the root lists no queues")
    tree = _with_scheduler_defaults(reader, tree)
    placement = _placement(reader)
    for name, value in props.items():
        if name not in reader.used:
            reader.notes.append(Unmodelled(name, value.strip()))
    return ImportedQueues(source, CAPACITY, tree, placement, tuple(reader.notes))


def _with_scheduler_defaults(reader: _Reader, tree: QueueSpec) -> QueueSpec:
    """``tree`` with the scheduler-wide ``maximum-applications`` and
    ``maximum-am-resource-percent`` applied to the leaves that set neither themselves, as
    YARN does: a leaf's maximum is the system's times its absolute capacity (rounded
    down), its AM share the system's."""
    found: dict[str, Any] = {}
    for key, attr in LEAF_KEYS:
        if key in ("maximum-applications", "maximum-am-resource-percent"):
            name = PREFIX + key
            if name in reader.props:
                reader.used.add(name)
                found.update(reader.leaf_limits_of(name, key, attr))
    if not found:
        return tree
    return _fill(tree, found, 1.0)


def _fill(q: QueueSpec, found: dict[str, Any], parent_abs: float) -> QueueSpec:
    absolute = parent_abs * (q.capacity if q.capacity is not None else 100.0) / 100.0
    if q.children:
        kids = tuple(_fill(c, found, absolute) for c in q.children)
        return dataclasses.replace(q, children=kids)
    changes: dict[str, Any] = {}
    if q.maximum_applications is None and "maximum_applications" in found:
        changes["maximum_applications"] = int(found["maximum_applications"] * absolute + 1e-9)
    pct = found.get("maximum_am_resource_percent")
    if q.maximum_am_resource_percent is None and pct is not None:
        changes["maximum_am_resource_percent"] = pct
    return dataclasses.replace(q, **changes) if changes else q


def _placement(reader: _Reader) -> tuple[PlacementRule, ...]:
    override_text = reader.props.get(PREFIX + OVERRIDE, "false").strip().lower()
    reader.used.add(PREFIX + OVERRIDE)
    if override_text not in ("true", "false"):
        raise QueueConfigError(reader.source, PREFIX + OVERRIDE, "expected true or false")
    override = override_text == "true"
    text = reader.props.get(PREFIX + MAPPINGS, "")
    reader.used.add(PREFIX + MAPPINGS)
    rules: list[PlacementRule] = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) != 3 or parts[0] not in ("u", "g") or not all(parts):
            expected = "u:USER:QUEUE or g:GROUP:QUEUE"
            raise QueueConfigError(
                reader.source, PREFIX + MAPPINGS, f"expected {expected}, got {entry!r}"
            )
        kind, who, queue = parts
        if kind == "g" or "%" in queue.replace("%user", ""):
            reader.notes.append(Unmodelled(MAPPINGS, entry))  # groups: treadle has none
            continue
        user = None if who == "%user" else who
        target = None if queue == "%user" else queue.replace("%user", who)
        rules.append(PlacementRule("mapping", target, user, override=override))
    return tuple(rules)
