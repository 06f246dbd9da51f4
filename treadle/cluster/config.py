"""A workload's queues, users and heartbeat as the RM's configuration file: what local and
container clusters hand their RM, and what ``treadle cluster config WORKLOAD`` prints.

The file is the RM's (``rm.server.config`` reads it, limits too); writing one for a
workload is a tool's job, so it stands here, and the RM imports nothing of it. Every
entry is one that file's reader accepts back, giving the same tree (``QueueSpec``)."""

from __future__ import annotations

from typing import Any

import yaml

from treadle.model import ROOT_QUEUE, QueueSpec, UserSpec, Workload


def rm_config_for(workload: Workload, comment: str | None = None) -> str:
    """The configuration file of the RM of a cluster of ``workload``'s shape, under
    ``comment`` (each of its lines a YAML comment)."""
    doc: dict[str, Any] = {"heartbeat_s": workload.cluster.heartbeat_s}
    root = workload.queues
    if root.name == ROOT_QUEUE and root.children:
        doc["queues"] = [_queue_doc(c) for c in root.children]
        if root.submit_acl is not None or root.admin_acl is not None:
            doc["queues"] = [{"name": ROOT_QUEUE, **_acl_doc(root), "queues": doc["queues"]}]
    doc["users"] = {name: _user_doc(u) for name, u in workload.users.items()}
    head = "".join(f"# {line}\n" for line in (comment or "").splitlines())
    return head + yaml.safe_dump(doc, sort_keys=False)


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
    doc.update(_acl_doc(q))
    return doc


def _acl_doc(q: QueueSpec) -> dict[str, str]:
    acls = {"acl_submit_applications": q.submit_acl, "acl_administer_queue": q.admin_acl}
    return {k: v for k, v in acls.items() if v is not None}


def _user_doc(u: UserSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"weight": u.weight}
    if u.budget is not None:
        doc["budget"] = u.budget
    if u.groups:
        doc["groups"] = list(u.groups)
    return doc
