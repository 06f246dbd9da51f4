"""The scheduling-policy API: everything a policy plugin imports, from one place.

- ``views``: the read-only views of the RM's state a policy sees (``ClusterView``, ...);
- ``base``: ``Policy[P]``, generic over its pydantic parameters, and ``Placement``;
- ``ordering``: ``OrderingPolicy`` (an order over applications) and first-fit helpers;
- ``queuetree``: ``QueueTreePolicy`` (walk the queue tree, order a leaf's applications);
- ``shares``: ``CachedShares`` (entitlements recomputed periodically) and ``SharesCache``;
- ``packing``: Tetris' alignment, remaining work and the shape index of asks;
- ``fairshare``: DRF progressive filling and entitlements, water-filling;
- ``stageorder``: ``StageOrderingPolicy`` (an order over task sets: one stage's asks).
- ``accounts``: ``AccountsPolicy``, what a policy with per-queue budgets offers the RM;
- ``dynprio``: Dynamic Priority's books of one allocation interval (``allocate``) and its
  choice of preemption victims (``choose_victims``).
- ``tracking``: the RM's feed of changed applications and entries filed by ask shape,
  which keep the helpers' order between heartbeats.

Plugins in the ``treadle.policies`` entry-point group subclass :class:`Policy`.
"""

from __future__ import annotations

from rm.policy.accounts import AccountBalance, AccountBook, AccountInfo, AccountsPolicy
from rm.policy.base import NoParams, P, Placement, Policy, PolicyLog
from rm.policy.toolkit.dynprio import Account, Allocation, Book, Held, allocate, choose_victims
from rm.policy.toolkit.fairshare import drf_entitlements, progressive_fill, water_fill
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
from rm.policy.toolkit.tracking import ByShape, Changes, shapes_of
from rm.policy.views import AppView, ClusterView, NodeView, QueueView, UserView

#: The entry-point group of policy plugins (the registry's ``policies`` kind).
ENTRY_POINT_GROUP = "treadle.policies"

__all__ = [
    "ENTRY_POINT_GROUP",
    "Account",
    "AccountBalance",
    "AccountBook",
    "AccountInfo",
    "AccountsPolicy",
    "Allocation",
    "AppView",
    "AskIndex",
    "Book",
    "ByShape",
    "CachedShares",
    "Changes",
    "ClusterView",
    "Entry",
    "FairWindow",
    "Held",
    "NoParams",
    "NodeView",
    "OrderingPolicy",
    "P",
    "Placement",
    "Policy",
    "PolicyLog",
    "QueueTreePolicy",
    "QueueView",
    "SharesCache",
    "SparkOrderParams",
    "SparkStageIds",
    "StageOrderParams",
    "StageOrderingPolicy",
    "TaskSet",
    "UserView",
    "alignment",
    "allocate",
    "best_scored",
    "choose_victims",
    "drf_entitlements",
    "fill_node",
    "fill_task_set",
    "first_fit_ask",
    "new_arrivals",
    "progressive_fill",
    "remaining_work",
    "shapes_of",
    "slot_time",
    "task_sets",
    "waiting_sets",
    "water_fill",
]
