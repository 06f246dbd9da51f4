"""A Fair Scheduler allocation file (``<allocations>``) as an ``ImportedQueues``.

As ``AllocationFileLoaderService`` and ``AllocationFileQueueParser`` read it: ``<queue>``
(or ``<pool>``) elements nest; a ``<queue name="root">`` must then be the only top-level
one; names are trimmed and hold no period. What maps:

- ``<weight>``: the queue's weight (> 0); ``<aclSubmitApps>`` and ``<aclAdministerApps>``:
  who may submit, who administers (``treadle.acl``; the root's default is everyone, every
  other queue's nobody);
- ``<queuePlacementPolicy>``: its ``specified``, ``user``, ``default`` (``queue=``) and
  ``reject`` rules, in order (a rule whose queue does not exist passes to the next: treadle
  creates no queues, except that ``specified`` with ``create`` names one the file must
  have); without a policy, ``specified``, ``user``, ``default``, as the Fair Scheduler's
  own default; ``root.default`` exists whether the file declares it or not, as in YARN.

- the properties the ``fair`` policy honours (``treadle.importers.fairprops``):
  ``minResources``, ``maxResources``, ``maxRunningApps``, ``maxAMShare``,
  ``schedulingPolicy`` (``schedulingMode``), the preemption timeouts and threshold,
  ``allowPreemptionFrom``, ``<user>``'s ``maxRunningApps`` and the matching file-wide
  defaults.

Recorded as not modelled: ``maxChildResources``, the reservation ACLs, ``reservation``,
``type="parent"`` on a queue with no children (it takes no jobs), the other scheduler-wide
settings, and the group rules (``primaryGroup``, ``secondaryGroupExistingQueue``,
``nestedUserQueue``).
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from treadle.importers.fairprops import (
    DEFAULTS,
    QUEUE_PROPERTIES,
    apply_defaults,
    fifo_parent,
)
from treadle.importers.yarnqueues import (
    FAIR,
    PARENT_MARK,
    ImportedQueues,
    PlacementRule,
    QueueConfigError,
    Unmodelled,
    parse_float,
)
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec

_QUEUE_TAGS = ("queue", "pool")
_GROUP_RULES = ("primaryGroup", "secondaryGroupExistingQueue", "nestedUserQueue")
_RULES = ("specified", "user", "default", "reject", *_GROUP_RULES)


def read_property(tag: str, text: str, source: str, where: str) -> tuple[str, Any]:
    """The QueueSpec field and value of queue element ``tag``; a bad value is an error
    naming ``where``."""
    key, parse = QUEUE_PROPERTIES[tag]
    return key, _checked(parse, text, source, f"{where}.{tag}")


def _checked(parse: Callable[[str], Any], text: str, source: str, where: str) -> Any:
    try:
        return parse(text)
    except ValueError as e:
        raise QueueConfigError(source, where, str(e)) from None


def read_default(tag: str, text: str, source: str) -> tuple[str, Any, str]:
    key, parse, scope = DEFAULTS[tag]
    return key, _checked(parse, text, source, tag), scope


#: Queue elements recorded as not modelled, with the check their value gets (None: any).
_UNMODELLED: dict[str, Callable[[str], object] | None] = {
    "maxChildResources": None,
    "aclAdministerReservations": None,
    "aclListReservations": None,
    "aclSubmitReservations": None,
    "reservation": None,
}


@dataclass
class _Reader:
    source: str
    notes: list[Unmodelled] = field(default_factory=list)
    #: File-wide defaults: QueueSpec field -> (value, which queues).
    defaults: dict[str, tuple[Any, str]] = field(default_factory=dict)
    users: list[tuple[str, int]] = field(default_factory=list)

    def error(self, where: str, message: str) -> QueueConfigError:
        return QueueConfigError(self.source, where, message)

    def queue(self, el: ET.Element, parent: str | None) -> QueueSpec:
        name = (el.get("name") or "").strip()
        where = f"{parent}.<queue name={name!r}>" if parent else f"<queue name={name!r}>"
        if not name:
            raise self.error(where, "a queue needs a non-empty name")
        if "." in name:
            raise self.error(where, "a queue name holds no period")
        path = f"{parent}.{name}" if parent else name
        weight = 1.0
        acls: dict[str, str | None] = {"aclSubmitApps": None, "aclAdministerApps": None}
        honoured: dict[str, Any] = {}
        children: list[QueueSpec] = []
        unmodelled: list[tuple[str, str]] = []
        for child in el:
            tag, text = child.tag, child.text or ""
            if tag in _QUEUE_TAGS:
                children.append(self.queue(child, path))
            elif tag == "weight":
                weight = parse_float(text, self.source, f"{path}.weight")
                if weight <= 0:
                    raise self.error(f"{path}.weight", f"must be > 0, got {text.strip()!r}")
            elif tag in acls:
                acls[tag] = text
            elif tag in QUEUE_PROPERTIES:
                key, value = read_property(tag, text, self.source, path)
                honoured[key] = value
            else:
                self.check(tag, text, path)
                unmodelled.append((tag, text.strip()))
        if not children and el.get("type") == "parent":
            unmodelled.append(PARENT_MARK)
        self.notes.extend(Unmodelled(k, v, path) for k, v in unmodelled)
        names = [c.name for c in children]
        for n in names:
            if names.count(n) > 1:
                raise self.error(path, f"queue {n!r} is declared twice")
        return QueueSpec(
            name,
            weight,
            children=tuple(children),
            submit_acl=acls["aclSubmitApps"],
            admin_acl=acls["aclAdministerApps"],
            unmodelled=tuple(unmodelled),
            **honoured,
        )

    def check(self, tag: str, text: str, path: str) -> None:
        parse = _UNMODELLED.get(tag)
        if parse is None:
            return
        try:
            parse(text)
        except ValueError:
            raise self.error(f"{path}.{tag}", f"expected a number, got {text.strip()!r}") from None

    def user(self, el: ET.Element) -> None:
        """A ``<user>``'s limits: ``maxRunningApps`` honoured, the others noted."""
        name = (el.get("name") or "").strip()
        for limit in el:
            text = (limit.text or "").strip()
            if limit.tag == "maxRunningApps" and name:
                _, count = read_property(limit.tag, text, self.source, f"user {name!r}")
                self.users.append((name, count))
            else:
                self.notes.append(Unmodelled(f"user {name!r} {limit.tag}", text))

    def placement(self, el: ET.Element) -> tuple[PlacementRule, ...]:
        rules: list[PlacementRule] = []
        for i, rule in enumerate(el):
            name = rule.get("name", "")
            where = f"queuePlacementPolicy.rule[{i}]"
            if rule.tag != "rule" or name not in _RULES:
                raise self.error(where, f"expected a rule named one of {', '.join(_RULES)}")
            create = rule.get("create", "true").strip().lower()
            if create not in ("true", "false"):
                raise self.error(f"{where}.create", f"expected true or false, got {create!r}")
            if name in _GROUP_RULES:
                self.notes.append(Unmodelled(f"queuePlacementPolicy rule {name}", "skipped"))
                continue
            queue = rule.get("queue") if name == "default" else None
            rules.append(PlacementRule(name, queue and queue.strip(), create=create == "true"))
        return tuple(rules)


def read_fair(root: ET.Element, source: str) -> ImportedQueues:
    """The queue tree, placement and unmodelled settings of a Fair Scheduler file."""
    reader = _Reader(source)
    queues = [el for el in root if el.tag in _QUEUE_TAGS]
    placement: tuple[PlacementRule, ...] = (
        PlacementRule("specified", create=True),
        PlacementRule("user", create=True),
        PlacementRule("default"),
    )
    for el in root:
        if el.tag == "queuePlacementPolicy":
            placement = reader.placement(el)
        elif el.tag == "user":
            reader.user(el)
        elif el.tag in DEFAULTS:
            key, value, scope = read_default(el.tag, el.text or "", source)
            reader.defaults[key] = (value, scope)
        elif el.tag not in _QUEUE_TAGS:
            reader.notes.append(Unmodelled(el.tag, (el.text or "").strip()))
    if len(queues) == 1 and (queues[0].get("name") or "").strip().lower() == ROOT_QUEUE:
        tree = dataclasses.replace(reader.queue(queues[0], None), name=ROOT_QUEUE)
    elif any((q.get("name") or "").strip().lower() == ROOT_QUEUE for q in queues):
        raise reader.error("<queue name='root'>", "a root queue must be the only top-level queue")
    else:
        tree = QueueSpec(ROOT_QUEUE, children=tuple(reader.queue(q, ROOT_QUEUE) for q in queues))
    if not any(c.name == DEFAULT_QUEUE for c in tree.children):
        tree = dataclasses.replace(tree, children=(*tree.children, QueueSpec(DEFAULT_QUEUE)))
    tree = apply_defaults(tree, reader.defaults, tuple(reader.users))
    fifo = fifo_parent(tree)
    if fifo is not None:
        raise reader.error(f"{fifo}.schedulingPolicy", "fifo is for leaf queues only")
    return ImportedQueues(source, FAIR, tree, placement, tuple(reader.notes))
