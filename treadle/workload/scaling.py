"""Scaling a loaded workload without editing its file: the cluster's node count
(``with_nodes``) and the offered load (``with_load``), as ``--nodes``, ``--nodes-scale``
and ``--load`` apply them.

Offered load: the busiest resource's demand over what the cluster offers while jobs
arrive, ``max over resources r of sum(tasks x duration x r asked) / (capacity of r x
arrival span)``, the span running from the first submission to the last. 1.0 means the
arrivals alone would keep the busiest resource full; above 1 a queue builds up. A target
load stretches (or compresses) every submission time about the first one by ``offered /
target`` (to the millisecond); the jobs themselves, the cluster and the admin timeline
stay. Closed-loop followers keep their waits (their ``submit_s``, a lower bound, is
scaled too).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from treadle.errors import InputError
from treadle.model import ClusterSpec, NodeSpec, Workload
from treadle.workload.schema import MAX_NODES

#: Bounds of ``--nodes-scale`` and ``--load``: beyond them a run says little.
MAX_NODES_SCALE = 1000.0
MAX_LOAD = 100.0


def with_nodes(wl: Workload, count: int) -> Workload:
    """``wl`` on ``count`` nodes: its first ``count`` nodes, or all of them and copies in
    turn (resources and rack of the node copied, id ``ID-K`` for the K-th copy)."""
    if not 1 <= count <= MAX_NODES:
        raise InputError("--nodes", None, f"must be between 1 and {MAX_NODES}, got {count}")
    base = wl.cluster.nodes
    ids = {n.node_id for n in base}
    nodes = list(base[:count])
    for i in range(len(base), count):
        tpl = base[i % len(base)]
        node_id = f"{tpl.node_id}-{i // len(base)}"
        if node_id in ids:
            raise InputError("--nodes", None, f"the copy's id {node_id!r} is already a node's")
        ids.add(node_id)
        nodes.append(NodeSpec(node_id, tpl.resources, tpl.rack))
    cluster = dataclasses.replace(wl.cluster, nodes=tuple(nodes))
    _check_fits(wl, cluster, f"--nodes {count}")
    return dataclasses.replace(wl, cluster=cluster)


def scaled_node_count(wl: Workload, scale: float) -> int:
    """The node count ``--nodes-scale`` gives: ``round(nodes x scale)``, at least 1."""
    if not (0 < scale <= MAX_NODES_SCALE) or not math.isfinite(scale):
        raise InputError(
            "--nodes-scale", None, f"must be > 0 and <= {MAX_NODES_SCALE:g}, got {scale:g}"
        )
    return max(1, round(len(wl.cluster.nodes) * scale))


def _check_fits(wl: Workload, cluster: ClusterSpec, flag: str) -> None:
    for job in wl.jobs:
        for s in job.stages:
            if not cluster.fits_some_node(s.resources):
                raise InputError(
                    flag,
                    None,
                    f"no node left fits job {job.name!r} stage {s.name!r} ({s.resources}); "
                    "keep more nodes",
                )


def arrival_span(wl: Workload) -> float:
    """Seconds from the first submission to the last."""
    times = [j.submit_s for j in wl.jobs]
    return max(times) - min(times) if times else 0.0


def offered_load(wl: Workload) -> float:
    """The busiest resource's demand over the capacity-seconds of the arrival span (see
    the module's docstring); inf when every job arrives at once."""
    span = arrival_span(wl)
    cap = wl.cluster.capacity
    demand = {r: sum(s.resources[r] * s.work_s for j in wl.jobs for s in j.stages) for r in cap}
    busiest = max((demand[r] / cap[r] for r in cap if cap[r] > 0), default=0.0)
    return busiest / span if span > 0 else math.inf


def with_load(wl: Workload, target: float) -> tuple[Workload, float, float]:
    """``wl`` with its submissions stretched or compressed about the first one to an
    offered load of ``target``; also the load it had and the factor applied to times."""
    if not (0 < target <= MAX_LOAD) or not math.isfinite(target):
        raise InputError("--load", None, f"must be > 0 and <= {MAX_LOAD:g}, got {target:g}")
    before = offered_load(wl)
    if not math.isfinite(before) or before <= 0:
        raise InputError(
            "--load",
            None,
            "the workload's jobs all arrive at one time (or ask for nothing), so there are "
            "no arrivals to stretch",
        )
    factor = before / target
    t0 = min(j.submit_s for j in wl.jobs)
    # Milliseconds: no float noise in the logs' submission times.
    jobs = tuple(
        dataclasses.replace(j, submit_s=round(t0 + (j.submit_s - t0) * factor, 3)) for j in wl.jobs
    )
    return dataclasses.replace(wl, jobs=jobs), before, factor


def scaled(
    wl: Workload, nodes: int | None, nodes_scale: float | None, load: float | None
) -> tuple[Workload, dict[str, Any]]:
    """``wl`` on ``nodes`` nodes (or its count times ``nodes_scale``), then at offered
    ``load``, and the record of what was done (empty when nothing is asked), which the run
    keeps in its parameters."""
    record: dict[str, Any] = {}
    if nodes_scale is not None:
        nodes = scaled_node_count(wl, nodes_scale)
        record["nodes_scale"] = nodes_scale
    if nodes is not None:
        record["nodes_before"] = len(wl.cluster.nodes)
        wl = with_nodes(wl, nodes)
        record["nodes"] = nodes
    if load is not None:
        wl, before, factor = with_load(wl, load)
        record |= {"load": load, "load_before": round(before, 6), "arrival_factor": factor}
    return wl, record
