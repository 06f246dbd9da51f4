"""What a run shows of itself: the scheduling decisions logged at debug level, and the
canonical order of its event log."""

from __future__ import annotations

import operator
from typing import Any

import structlog

from rm.core.facade import ResourceManager
from rm.policy import Policy
from treadle import events as ev

log = structlog.get_logger("sim")


def logging_decisions(policy: Policy, name: str, rm: ResourceManager) -> Any:
    """At debug level (DESIGN.md: one line per scheduling decision), the RM's heartbeat
    with every placement ``policy`` yields logged; otherwise nothing is wrapped."""
    now = [0.0]
    decide = policy.on_node_heartbeat

    def on_node_heartbeat(node: Any, cluster: Any) -> Any:
        for p in decide(node, cluster):
            app, prio = getattr(p, "app_id", None), getattr(p, "priority", None)
            log.debug("placement", t=now[0], policy=name, node=node.node_id, app=app, priority=prio)
            yield p

    policy.on_node_heartbeat = on_node_heartbeat  # type: ignore[method-assign]
    heartbeat = rm.node_heartbeat

    def timed(hb: Any, t: float) -> Any:
        now[0] = t
        return heartbeat(hb, t)

    return timed


_STARTED = ev.CONTAINER_STARTED
_by_t = operator.itemgetter("t")
_by_container = operator.itemgetter("container")


def canonical_order(records: list[ev.Record]) -> list[ev.Record]:
    """Time order; within an instant, starts last and by container id. Starts are logged
    when a node reports them, which heartbeat elision may shift within an instant; ordering
    them by container keeps the file canonical. (Two stable sorts on C-level keys: the key
    ``(t, is_start, container)`` as a Python function costs twice as much. The ids compare
    as strings here, not by their numbers as ``treadle.yarnids.container_sort_key`` does:
    the order only has to be the same every run, and a numeric key costs ten times as
    much.)"""
    started = [r for r in records if r["event"] == _STARTED]
    started.sort(key=_by_container)
    out = [r for r in records if r["event"] != _STARTED]
    out += started
    out.sort(key=_by_t)
    return out
