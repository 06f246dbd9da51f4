"""YARN scheduler configuration as treadle's queue tree: ``--queues FILE``.

``treadle.importers.yarnconf.load_queues`` reads a Capacity Scheduler
``capacity-scheduler.xml`` (``treadle.importers.capacityxml``) or a Fair Scheduler
allocation file (``treadle.importers.fairxml``), told apart by the root element
(``<configuration>`` or ``<allocations>``), into the ``ImportedQueues`` of this module:
the tree as the model's ``QueueSpec`` values, the placement rules that map a job's user
to a queue, and what the file sets that treadle does not model (``Unmodelled``: each is
one warning line, or with ``strict`` an error). ``apply_queues`` puts an imported tree on
a workload.

The XML is parsed with the standard library, and a document with a DTD is refused
before parsing: without one, no entity can be declared, so nothing from outside can
expand (the "billion laughs") or pull in other files. YARN's own files have none.

How a job finds its queue (``apply_queues``), as YARN places an application:

- a job that names ``default`` (what a trace without queues, or a workload file, gives)
  names no queue: YARN treats a submission to ``default`` so in both schedulers;
- the placement rules then decide (Capacity: ``queue-mappings``, which also override a
  named queue with ``queue-mappings-override.enable``; Fair: ``<queuePlacementPolicy>``,
  by default ``specified``, ``user``, ``default``);
- a queue is named by its leaf name, its path (``root.a.b``) or its path without
  ``root.``; treadle's queues are named by their leaf name, so two queues of one file
  with the same leaf name are an error;
- a job whose queue is ``STOPPED`` (or under a stopped parent), or whose user neither
  ``acl_submit_applications`` nor ``acl_administer_queue`` up its path admits
  (``treadle.acl``: the root's default is everyone, every other queue's nobody, as in YARN
  with ``yarn.acl.enable``), or that a ``reject`` rule takes, is refused at submission:
  it is left out of the run, and one warning line counts and names those jobs.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from treadle.acl import EVERYONE, QueueAcls, acls_given, user_groups
from treadle.errors import InputError
from treadle.importers.common import read_text
from treadle.importers.fairprops import describe_fair
from treadle.model import DEFAULT_QUEUE, QUEUE_STOPPED, ROOT_QUEUE, JobSpec, QueueSpec, Workload

CAPACITY, FAIR = "capacity", "fair"
"""``ImportedQueues.scheduler``: which YARN scheduler's file it came from."""

PARENT_MARK = ("type", "parent")
"""In a queue's ``unmodelled``: a queue with no children that the file declares a parent
(a Fair Scheduler ``type="parent"``): it takes no jobs."""


class QueueConfigError(InputError):
    """A scheduler configuration file is malformed (or, with ``strict``, sets something
    treadle does not model)."""


@dataclass(frozen=True)
class Unmodelled:
    """A property the file sets that treadle does not honour: ``where`` is a queue's path,
    or ``None`` for a scheduler-wide one."""

    prop: str
    value: str
    where: str | None = None


@dataclass(frozen=True)
class PlacementRule:
    """One placement rule, tried in order until one gives a queue.

    ``kind``: ``specified`` (the queue the job names), ``user`` (the queue named after the
    job's user), ``mapping`` (``user``'s jobs go to ``queue``; ``user`` None: every user),
    ``default`` (``queue``) or ``reject``. ``create``: a Fair rule that may create its
    queue (treadle's tree is fixed: such a queue must exist, or the next rule decides).
    ``override``: a Capacity mapping that applies to jobs that name a queue too."""

    kind: str
    queue: str | None = None
    user: str | None = None
    create: bool = False
    override: bool = False

    def describe(self) -> str:
        if self.kind == "mapping":
            who = self.user if self.user is not None else "%user"
            to = self.queue if self.queue is not None else "%user"
            return f"u:{who}:{to}" + (" (overrides a named queue)" if self.override else "")
        return self.kind + (f" {self.queue}" if self.queue else "")


@dataclass(frozen=True)
class ImportedQueues:
    """A YARN scheduler file as treadle understood it."""

    source: str
    scheduler: str
    root: QueueSpec
    placement: tuple[PlacementRule, ...]
    unmodelled: tuple[Unmodelled, ...]

    def warnings(self) -> list[str]:
        """One line per property treadle does not model, naming it and where it is set."""
        by_prop: dict[str, list[Unmodelled]] = {}
        for u in self.unmodelled:
            by_prop.setdefault(u.prop, []).append(u)
        lines = []
        for prop, notes in by_prop.items():
            places = [n.where for n in notes if n.where]
            at = f" (at {', '.join(places)})" if places else ""
            lines.append(f"{self.source}: {prop}{at}: not modelled by treadle; ignored")
        return lines

    def paths(self) -> dict[str, QueueSpec]:
        """Every queue by its path (``root``, ``root.a``, ...)."""
        return dict(_paths(self.root, ROOT_QUEUE))


def _paths(q: QueueSpec, path: str) -> Iterator[tuple[str, QueueSpec]]:
    yield path, q
    for c in q.children:
        yield from _paths(c, f"{path}.{c.name}")


# ---------------------------------------------------------------------------- reading
def parse_xml(path: Path, source: str) -> ET.Element:
    """The root element of an XML file; a DTD, or XML that does not parse, is one error."""
    text = read_text(path, source)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise QueueConfigError(source, None, "has a DTD (<!DOCTYPE or <!ENTITY): not accepted")
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        line, column = e.position
        message = str(e).partition(":")[0]
        raise QueueConfigError(
            source, f"line {line}, column {column + 1}", f"not well-formed XML ({message})"
        ) from None


def check_leaf_names(root: QueueSpec, source: str) -> None:
    """treadle names queues by their last name: two queues may not share one."""
    seen: dict[str, str] = {}
    for path, q in _paths(root, ROOT_QUEUE):
        if q.name in seen:
            raise QueueConfigError(
                source,
                path,
                f"queue name {q.name!r} is also {seen[q.name]}; treadle names queues by "
                "their last name, which must be unique",
            )
        seen[q.name] = path


def parse_float(text: str, source: str, where: str, *, low: float = 0.0) -> float:
    """A number >= ``low`` (as Java's ``Float.parseFloat`` takes it, trimmed)."""
    try:
        value = float(text.strip())
    except ValueError:
        value = float("nan")
    if not value >= low or value == float("inf"):
        raise QueueConfigError(source, where, f"expected a number >= {low:g}, got {text!r}")
    return value


# --------------------------------------------------------------------------- applying
def with_root_acl_defaults(root: QueueSpec) -> QueueSpec:
    """A YARN file's tree with the root's ACLs that it does not set at YARN's default,
    everyone (``CapacitySchedulerConfiguration.getAcl``; the Fair Scheduler's too), when
    it sets any ACL; a file with none keeps none (``treadle.acl``: no ACL in force)."""
    if not acls_given(root):
        return root
    return dataclasses.replace(
        root,
        submit_acl=EVERYONE if root.submit_acl is None else root.submit_acl,
        admin_acl=EVERYONE if root.admin_acl is None else root.admin_acl,
    )


def _queue_lookup(imported: ImportedQueues) -> dict[str, tuple[str, QueueSpec]]:
    """A queue's every name (leaf name, path, path without ``root.``) -> (path, spec)."""
    out: dict[str, tuple[str, QueueSpec]] = {}
    for path, q in imported.paths().items():
        for name in (q.name, path, path.removeprefix(f"{ROOT_QUEUE}.")):
            out.setdefault(name, (path, q))
    return out


@dataclass
class _Placer:
    imported: ImportedQueues
    lookup: dict[str, tuple[str, QueueSpec]]

    def exists(self, name: str | None) -> bool:
        return name is not None and name in self.lookup

    def place(self, user: str, named: str | None) -> str | None:
        """The queue a job of ``user`` naming ``named`` (None: none) goes to; None: rejected."""
        rules = self.imported.placement
        if self.imported.scheduler == CAPACITY:
            for r in rules:
                if (named is None or r.override) and r.user in (None, user):
                    return r.queue if r.queue is not None else user
            return named or DEFAULT_QUEUE
        for r in rules:
            if r.kind == "reject":
                return None
            queue = {"specified": named, "user": user, "default": r.queue or DEFAULT_QUEUE}
            target = queue.get(r.kind)
            if target is not None and (self.exists(target) or (r.create and r.kind == "specified")):
                return target
        return None


def apply_queues(wl: Workload, imported: ImportedQueues) -> tuple[Workload, list[str]]:
    """``wl`` with ``imported``'s queue tree, each job placed by its rules; and the
    warning lines about jobs refused at submission (left out of the workload)."""
    placer = _Placer(imported, _queue_lookup(imported))
    leaves = [q.name for q in imported.root.walk() if q.is_leaf and q is not imported.root]
    acls = QueueAcls(imported.root, user_groups(wl.users))
    paths = imported.paths()
    kept: list[JobSpec] = []
    refused: dict[str, list[str]] = {}
    for job in wl.jobs:
        named = None if job.queue == DEFAULT_QUEUE else job.queue
        target = placer.place(job.user, named)
        if target is None:
            refused.setdefault("a placement rule rejects them", []).append(job.name)
            continue
        if target not in placer.lookup:
            raise QueueConfigError(
                imported.source,
                None,
                f"job {job.name!r} goes to queue {target!r}, which the file does not define "
                f"(leaf queues: {', '.join(leaves)})",
            )
        path, spec = placer.lookup[target]
        if not spec.is_leaf or PARENT_MARK in spec.unmodelled:
            raise QueueConfigError(
                imported.source,
                path,
                f"job {job.name!r} goes to a parent queue; jobs go to leaf queues "
                f"({', '.join(leaves)})",
            )
        reason = _refusal(acls, paths, path, job.user)
        if reason is not None:
            refused.setdefault(reason, []).append(job.name)
            continue
        kept.append(job if job.queue == spec.name else dataclasses.replace(job, queue=spec.name))
    if wl.jobs and not kept:
        raise QueueConfigError(imported.source, None, "refuses every job of the workload")
    lines = [
        f"{imported.source}: {len(names)} job(s) refused at submission, {reason}: {_some(names)}"
        for reason, names in refused.items()
    ]
    _check_admin(wl, imported, placer)
    return dataclasses.replace(wl, queues=imported.root, jobs=tuple(kept)), lines


def _refusal(acls: QueueAcls, paths: dict[str, QueueSpec], path: str, user: str) -> str | None:
    """Why YARN would refuse a job of ``user`` at the queue at ``path``; None: it would not."""
    chain = [paths[".".join(path.split(".")[: i + 1])] for i in range(path.count(".") + 1)]
    if any(q.state == QUEUE_STOPPED for q in chain):
        return f"their queue {path} is STOPPED"
    if not acls.may_submit(user, chain[-1].name):
        return (
            f"neither acl_submit_applications nor acl_administer_queue on {path} or a parent "
            "admits their user"
        )
    return None


def _check_admin(wl: Workload, imported: ImportedQueues, placer: _Placer) -> None:
    for a in wl.admin:
        if a.queue not in placer.lookup:
            raise QueueConfigError(
                imported.source, None, f"the workload's admin timeline names queue {a.queue!r}"
            )


def _some(names: Sequence[str], at_most: int = 5) -> str:
    shown = ", ".join(names[:at_most])
    return shown + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


# --------------------------------------------------------------------------- printing
def describe_queues(imported: ImportedQueues) -> list[str]:
    """The tree as treadle understood it, one queue a line, then the placement rules."""
    kind = {CAPACITY: "Capacity Scheduler", FAIR: "Fair Scheduler"}[imported.scheduler]
    leaves = sum(1 for q in imported.root.walk() if q.is_leaf)
    lines = [f"{imported.source}: {kind} configuration, {leaves} leaf queue(s)"]
    lines.extend(_tree_lines(imported.root, imported.scheduler, ""))
    scheduler_wide = [u for u in imported.unmodelled if u.where is None]
    if scheduler_wide:
        lines.append("not modelled: " + ", ".join(f"{u.prop}={u.value}" for u in scheduler_wide))
    rules = [r.describe() for r in imported.placement]
    lines.append("placement: " + (", ".join(rules) if rules else "the queue a job names"))
    return lines


def _tree_lines(q: QueueSpec, scheduler: str, indent: str) -> Iterable[str]:
    facts = []
    if scheduler == CAPACITY and q.capacity is not None:
        facts.append(f"capacity {q.capacity:g}%, max {q.max_capacity:g}%")
    if scheduler == CAPACITY:
        facts.extend(_describe_capacity(q))
    if scheduler == FAIR:
        facts.append(f"weight {q.weight:g}")
        facts.extend(describe_fair(q))
    if q.state == QUEUE_STOPPED:
        facts.append(QUEUE_STOPPED)
    for what, acl in (("submit", q.submit_acl), ("administer", q.admin_acl)):
        if acl is not None:
            facts.append(f"{what} acl {acl.strip() or '(nobody)'!r}")
    line = f"{indent}{q.name}" + (f"  {'; '.join(facts)}" if facts else "")
    if q.unmodelled:
        line += "  [not modelled: " + ", ".join(f"{k}={v}" for k, v in q.unmodelled) + "]"
    yield line
    for c in q.children:
        yield from _tree_lines(c, scheduler, indent + "  ")


def _describe_capacity(q: QueueSpec) -> list[str]:
    """A leaf's honoured CapacityScheduler limits, as ``treadle queues`` prints them."""
    out = []
    for label, value, unit in (
        ("user limit factor", q.user_limit_factor, ""),
        ("min user limit", q.minimum_user_limit_percent, "%"),
        ("max applications", q.maximum_applications, ""),
        ("AM share", q.maximum_am_resource_percent, ""),
    ):
        if value is not None:
            out.append(f"{label} {value:g}{unit}")
    if q.ordering_policy is not None:
        out.append(f"ordering {q.ordering_policy}")
    return out
