"""Writing a columnar workload (``treadle.workload.columnar`` has the layout and the
reader): the jobs table a row group at a time, and the header, read back before anything
is written to check that it holds the workload's cluster, queues, users, seed and admin
timeline exactly."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from treadle.errors import WorkloadError
from treadle.model import ClusterSpec, JobSpec, NodeSpec, QueueSpec, Workload
from treadle.workload.columnar import (
    HEADER_KEY,
    JOBS,
    JOBS_PER_ROW_GROUP,
    VERSION,
    VERSION_KEY,
    Header,
)
from treadle.workload.errors import join


def write_workload(
    wl: Workload,
    path: Path,
    source: str = "",
    rows: int = JOBS_PER_ROW_GROUP,
    *,
    sort: bool = False,
) -> None:
    """Write ``wl`` to ``path``; a workload the layout cannot hold exactly (a queue tree
    imported from a YARN file, a name the header refuses) raises ``WorkloadError``
    naming ``source`` before anything is written. ``sort``: the jobs in submission order
    (stable: ties keep the workload's order), so that the file streams
    (``treadle.workload.streaming``); a run's results stay the same. A closed-loop
    workload keeps its order (it is read whole, and its followers are released in it)."""
    source = source or wl.name
    if sort and not wl.follows:
        wl = replace(wl, jobs=tuple(sorted(wl.jobs, key=lambda j: j.submit_s)))
    asks: Asks = {}
    for j in wl.jobs:
        for s in j.stages:
            asks.setdefault(_exact_amounts(s.resources), len(asks))
    header = header_text(wl, source, [dict((k, v) for k, _, v in a) for a in asks])
    metadata = {VERSION_KEY: VERSION, HEADER_KEY: header.encode("utf-8")}
    with pq.ParquetWriter(str(path), JOBS.with_metadata(metadata), compression="zstd") as out:
        for start in range(0, len(wl.jobs), rows):
            out.write_table(_jobs_table(wl, wl.jobs[start : start + rows], asks))


def _jobs_table(wl: Workload, jobs: Sequence[JobSpec], asks: Asks) -> pa.Table:
    follows = [wl.follows.get(j.name) for j in jobs]
    columns: dict[str, list[Any]] = {
        "name": [j.name for j in jobs],
        "user": [j.user for j in jobs],
        "queue": [j.queue for j in jobs],
        "submit_s": [j.submit_s for j in jobs],
        "spending_rate": [j.spending_rate for j in jobs],
        "priority": [j.priority for j in jobs],
        "scheduling_class": [j.scheduling_class for j in jobs],
        "follows": [f.after if f else None for f in follows],
        "follow_wait_s": [f.wait_s if f else None for f in follows],
        "stages": [
            [
                {
                    "name": s.name,
                    "parents": list(s.parents),
                    "ask": asks[_exact_amounts(s.resources)],
                    "durations_s": s.durations,
                }
                for s in j.stages
            ]
            for j in jobs
        ],
    }
    return pa.table(columns, schema=JOBS)


def header_text(wl: Workload, source: str, asks: list[dict[str, float]]) -> str:
    """The header's YAML; it is read back and must give ``wl``'s cluster, queues, users,
    seed and admin timeline exactly."""
    doc: dict[str, Any] = {"name": wl.name, "seed": wl.seed}
    groups, numbered = _node_groups(wl.cluster.nodes)
    doc["cluster"] = {
        "heartbeat_s": wl.cluster.heartbeat_s,
        "scheduling": wl.cluster.scheduling,
        "nodes": groups,
    }
    if not numbered:
        doc["node_ids"] = [n.node_id for n in wl.cluster.nodes]
    doc["queues"] = [_queue(q) for q in wl.queues.children]
    doc["users"] = {
        u.name: {"weight": u.weight, **({"budget": u.budget} if u.budget is not None else {})}
        for u in wl.users.values()
    }
    doc["asks"] = asks
    doc["admin"] = [{"at_s": a.at_s, "queue": a.queue, a.action: a.amount} for a in wl.admin]
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    try:
        header = Header(text, source)
    except WorkloadError as e:
        raise WorkloadError(
            source, e.field, f"cannot be written as a columnar workload: {e.message}"
        ) from None
    _check_written(wl, header, source)
    if [_exact_amounts(r) for r in header.asks] != [_exact_amounts(a) for a in asks]:
        raise WorkloadError(source, "asks", f"cannot be written as a columnar workload: {HELD}")
    return text


def _check_written(wl: Workload, header: Header, source: str) -> None:
    read_back = {
        "name": header.doc.name,
        "seed": header.doc.seed,
        "cluster": header.cluster,
        "queues": header.queues,
        "users": header.users,
        "admin": header.admin,
    }
    for key, value in read_back.items():
        if value != getattr(wl, key) or (
            key == "cluster" and _nodes_exactly(header.cluster) != _nodes_exactly(wl.cluster)
        ):
            raise WorkloadError(
                source,
                key,
                f"cannot be written as a columnar workload: {HELD}",
            )
    unknown = sorted(set(wl.follows) - {j.name for j in wl.jobs})
    if unknown:
        raise WorkloadError(source, "follows", f"names jobs not in the workload: {join(unknown)}")


_NUMBERED = re.compile(r"^(\S+?)([1-9][0-9]*)$")


def _node_groups(nodes: Sequence[NodeSpec]) -> tuple[list[dict[str, Any]], bool]:
    """Runs of alike nodes as node groups, and whether their numbering gives the ids
    (``{name}1``, ``{name}2``, ... counted per prefix)."""
    groups: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    numbered = True
    for n in nodes:
        match = _NUMBERED.match(n.node_id)
        prefix = match.group(1) if match else None
        if match is None or prefix is None or int(match.group(2)) != counters.get(prefix, 0) + 1:
            numbered = False
        name = prefix if numbered and prefix else "node"
        counters[name] = counters.get(name, 0) + 1
        shape = {"resources": dict(n.resources.items()), "rack": n.rack, "name": name}
        if groups and _exact(groups[-1]) == _exact(shape):
            groups[-1]["count"] += 1
        else:
            groups.append({"count": 1, **shape})
    if not numbered:  # regroup with one prefix: the ids are listed instead
        return _node_groups(
            [NodeSpec(f"node{i}", n.resources, n.rack) for i, n in enumerate(nodes, 1)]
        )[0], False
    return groups, True


HELD = "the header would not hold it exactly"
Exact = tuple[tuple[str, type, float], ...]
Asks = dict[Exact, int]
"""The workload's distinct asks, each with its index in the header's ``asks``."""


def _exact_amounts(amounts: Mapping[str, float]) -> Exact:
    """Amounts in order, telling an int from the equal float (the event log does)."""
    return tuple((k, type(v), v) for k, v in amounts.items())


def _exact(group: dict[str, Any]) -> tuple[object, ...]:
    """A node group's shape, exactly."""
    return _exact_amounts(group["resources"]), group["rack"], group["name"]


def _nodes_exactly(cluster: ClusterSpec) -> list[tuple[object, ...]]:
    return [(n.node_id, n.rack, _exact_amounts(n.resources)) for n in cluster.nodes]


def _queue(q: QueueSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": q.name, "weight": q.weight, "max_capacity": q.max_capacity}
    for key in ("capacity", "budget", "spending_rate"):
        if getattr(q, key) is not None:
            out[key] = getattr(q, key)
    if q.children:
        out["queues"] = [_queue(c) for c in q.children]
    return out
