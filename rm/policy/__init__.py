"""The scheduling-policy API: the contract between the RM and a policy plugin.

A plugin is a subclass of :class:`Policy` registered in the ``treadle.policies``
entry-point group (``ENTRY_POINT_GROUP``). It reads the RM's state through the read-only
views (``ClusterView``, ``NodeView``, ``AppView``, ``QueueView``, ``UserView``: valid
during the call only) and answers with ``Placement`` values. ``__all__`` names the
contract; the toolkit the built-in policies are made of (orders, queue trees, stage
orders, shares, packing, ``Changes``, ``ByShape``, ``SortedGroups``) is
``rm.policy.toolkit``, and is re-exported here for the plugins that import it from
``rm.policy``.

Required: ``on_node_heartbeat(node, cluster)``, called on each node heartbeat while
asks are pending; it yields ``Placement(app_id, priority)`` values (``placement(...)``
is the same, faster), each applied as it is yielded, so the views already show the
earlier ones. Set ``description`` too. An ``OrderingPolicy`` (toolkit) writes only a
``sort_key``; that is the place to start.

Optional hooks, every one a no-op by default (the RM skips a hook not overridden):

- lifecycle: ``log_to(log)`` once, then ``on_start(cluster)`` once, when the RM is built
  (queues and users known, no nodes nor applications yet); ``on_app_added`` when an
  application is submitted, ``on_app_removed`` when it finished, failed or was killed,
  ``on_app_moved`` when a client moved a running one to another leaf queue (by default
  nothing: override it to keep state per queue; ``refuse_move``, asked before, may
  refuse the move by a rule of the policy's);
- feeds: ``on_container_allocated`` after each of the policy's placements is applied
  (and for the containers an RM restart recovers), ``on_container_finished`` when a
  container ended (completed, failed, released, lost or preempted);
- shares and the clock: ``shares(cluster)``, each application's entitlement, sent to its
  AM in every Allocate response; ``tick(cluster)`` every ``tick_interval_s`` emulated
  seconds (None: never);
- preemption: ``preempt(cluster)`` right after each ``tick``: the container ids to take;
- accounts: ``tick_books()`` right after each ``tick``, what it booked per budget
  account (logged as ``dp_account`` records); a policy with budgets also implements the
  ``AccountsPolicy`` protocol, which the RM's admin calls use;
- what the RM shows and AMs do, asked once at start: ``uses_oracle()`` (show true task
  durations; the class attribute ``oracle``), ``shuffles_tasks()`` (AMs run each stage's
  tasks in a seeded random order).

A newcomer needs ``on_node_heartbeat`` (or a toolkit base class's ``sort_key``) and,
for state of its own, ``on_app_added`` / ``on_app_removed``; the rest serve fair shares,
budgets and preemption.

Errors: the RM validates every placement before applying it and rejects (and logs) an
impossible one, so a policy cannot corrupt the cluster's state; "nothing fits" is
yielding nothing, never an exception. An exception out of ``on_node_heartbeat`` is a
``PluginError`` naming the policy, the node and the time (the simulator stops; the RM
server logs it and goes on). Bad parameters fail at start-up (pydantic's validation of
``Params``); an ``AccountsPolicy`` method raises ``ValueError`` only for a rule of its own,
which the admin call reports as an invalid request.
"""

from __future__ import annotations

from rm.policy.accounts import AccountBalance, AccountBook, AccountInfo, AccountsPolicy
from rm.policy.base import NoParams, P, Placement, Policy, PolicyLog, placement
from rm.policy.toolkit import (
    Account as Account,
    Allocation as Allocation,
    AskIndex as AskIndex,
    Book as Book,
    ByShape as ByShape,
    CachedShares as CachedShares,
    Changes as Changes,
    Entry as Entry,
    FairWindow as FairWindow,
    Held as Held,
    OrderingPolicy as OrderingPolicy,
    QueueTreePolicy as QueueTreePolicy,
    SharesCache as SharesCache,
    SortedGroups as SortedGroups,
    SparkOrderParams as SparkOrderParams,
    SparkStageIds as SparkStageIds,
    StageOrderingPolicy as StageOrderingPolicy,
    StageOrderParams as StageOrderParams,
    TaskSet as TaskSet,
    alignment as alignment,
    allocate as allocate,
    best_scored as best_scored,
    choose_victims as choose_victims,
    drf_entitlements as drf_entitlements,
    fill_node as fill_node,
    fill_task_set as fill_task_set,
    first_fit_ask as first_fit_ask,
    new_arrivals as new_arrivals,
    progressive_fill as progressive_fill,
    remaining_work as remaining_work,
    shapes_of as shapes_of,
    slot_time as slot_time,
    task_sets as task_sets,
    waiting_sets as waiting_sets,
    water_fill as water_fill,
)
from rm.policy.views import AppView, ClusterView, NodeView, QueueView, UserView
from treadle.errors import PluginError

#: The entry-point group of policy plugins (the registry's ``policies`` kind).
ENTRY_POINT_GROUP = "treadle.policies"

__all__ = [
    "ENTRY_POINT_GROUP",
    "AccountBalance",
    "AccountBook",
    "AccountInfo",
    "AccountsPolicy",
    "AppView",
    "ClusterView",
    "NoParams",
    "NodeView",
    "P",
    "Placement",
    "PluginError",
    "Policy",
    "PolicyLog",
    "QueueView",
    "UserView",
    "placement",
]
