"""The policy toolkit: the building blocks of the built-in policies, for plugins to reuse.

Nothing here is part of the contract with the RM (that is ``rm.policy``): a plugin may
use any of it or none. By module:

- ``ordering``: ``OrderingPolicy`` (one order over the applications, kept between
  heartbeats) and the first-fit helpers ``first_fit_ask`` and ``fill_node``;
- ``queuetree``: ``QueueTreePolicy`` (walk the queue tree by a key per queue, order a
  leaf's applications);
- ``stageorder`` and ``tasksets``: ``StageOrderingPolicy`` (an order over task sets, one
  stage's asks of one application) and what it is made of (``TaskSet``, ...);
- ``shares``: ``CachedShares`` (entitlements recomputed periodically) and ``SharesCache``;
- ``fairshare``: DRF progressive filling and entitlements, water-filling;
- ``packing``: Tetris' alignment, remaining work, the shape index of asks (``AskIndex``)
  and the fairness window (``FairWindow``);
- ``multiqueue``: multi-level queues of jobs with pilot tasks (``MultiQueue``: gs, las);
- ``dynprio``: Dynamic Priority's books of one allocation interval (``allocate``) and its
  choice of preemption victims (``choose_victims``);
- ``tracking``: what keeps an order current between heartbeats: the RM's feed of changed
  applications (``Changes``), ordered entries in named groups (``SortedGroups``: a
  budget, quota or remaining-work order, O(log n) to file or unfile an entry) and
  entries filed by the shapes their applications ask for (``ByShape``).

``Entry`` is ``packing.Entry`` (an indexed ask); ``tracking.Entry`` is the alias of any
ordered tuple.
"""

from __future__ import annotations

from rm.policy.toolkit.dynprio import (
    Account,
    Allocation,
    Book,
    Held,
    Semantics,
    allocate,
    choose_victims,
    owed,
    round_half_up,
)
from rm.policy.toolkit.fairshare import drf_entitlements, progressive_fill, water_fill
from rm.policy.toolkit.multiqueue import Layout, MultiQueue, QueueJob, QueueParams, runtime_range
from rm.policy.toolkit.ordering import OrderingPolicy, fill_node, first_fit_ask
from rm.policy.toolkit.packing import (
    AskIndex,
    Entry,
    FairWindow,
    alignment,
    best_scored,
    remaining_work,
)
from rm.policy.toolkit.queuetree import QueueTreePolicy
from rm.policy.toolkit.shares import CachedShares, SharesCache
from rm.policy.toolkit.stageorder import StageOrderingPolicy
from rm.policy.toolkit.tasksets import (
    SparkOrderParams,
    SparkStageIds,
    StageOrderParams,
    TaskSet,
    fill_task_set,
    new_arrivals,
    slot_time,
    task_sets,
    waiting_sets,
)
from rm.policy.toolkit.tracking import ByShape, Changes, SortedGroups, free_test, shapes_of

__all__ = [
    "Account",
    "Allocation",
    "AskIndex",
    "Book",
    "ByShape",
    "CachedShares",
    "Changes",
    "Entry",
    "FairWindow",
    "Held",
    "Layout",
    "MultiQueue",
    "OrderingPolicy",
    "QueueJob",
    "QueueParams",
    "QueueTreePolicy",
    "Semantics",
    "SharesCache",
    "SortedGroups",
    "SparkOrderParams",
    "SparkStageIds",
    "StageOrderParams",
    "StageOrderingPolicy",
    "TaskSet",
    "alignment",
    "allocate",
    "best_scored",
    "choose_victims",
    "drf_entitlements",
    "fill_node",
    "fill_task_set",
    "first_fit_ask",
    "free_test",
    "new_arrivals",
    "owed",
    "progressive_fill",
    "remaining_work",
    "round_half_up",
    "runtime_range",
    "shapes_of",
    "slot_time",
    "task_sets",
    "waiting_sets",
    "water_fill",
]
