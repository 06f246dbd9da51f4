"""Stage-level ordering: an order over task sets, as Spark's schedulers order its
TaskSetManagers, instead of over applications.

A task set is one application's outstanding asks of one stage (``AppView.stage_of``);
asks that name no stage form a task set of their own per application (stage None). On a
node's heartbeat, ``changed`` sees the task sets new or changed since the last one, and
placement is first-fit in ``stage_key`` order (smallest first; ties keep submission
order: application, then stage). With ``resort`` false the order is the one at the start
of the heartbeat and each task set takes every container of the node it can use before
the next (Spark's ``resourceOffers``: one offer round); with ``resort`` true the keys are
computed again after every placement (the idealized model where each freed slot goes to
the task set first in order at that instant).

The task sets are kept between heartbeats, filed by (key, submission order) under the
shapes they ask for (``rm.policy.toolkit.tracking.ByShape``; with groups, the groups too), and
refiled only for the stages that changed (the RM's feed of changed applications and
their changed priorities: an ask, or a container started or ended): a placement costs
O(shapes + log task sets), and a change of one stage of a job with a thousand stages
refiles that stage alone.

Spark submits a stage the moment its parents end; a treadle AM asks for it on its next
call. So that the slots its parents free do not go to a task set behind it meanwhile, a
stage that is runnable by the job's DAG but not asked for yet (``AppView.unasked_stages``)
takes part in the order as a waiting task set for ``hold_s`` seconds after it became
runnable: where it comes first, the node keeps up to its task count of slots free for it.
``hold_s = 0`` never waits.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from rm.policy.base import P, Placement, Policy, placement
from rm.policy.toolkit.tasksets import (
    TaskSet,
    app_sets,
    ask_shapes,
    fill_task_set,
    first_fit_priority,
    hold_slots,
    serve_in_key_order,
    submission_order,
    task_sets,
    waiting_sets,
)
from rm.policy.toolkit.tracking import ByShape, Changes, Entry
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.resources import ZERO, Resources


class _Kept:
    """A stage-ordering policy's task sets between heartbeats."""

    __slots__ = (
        "app_group",
        "changes",
        "deferred",
        "groups",
        "last_seq",
        "members",
        "prio_stage",
        "sets",
        "stage_prios",
        "stale",
        "unasked",
    )

    def __init__(self) -> None:
        self.changes = Changes(priorities=True)
        #: Per application, its task sets by stage: (the task set, its entry).
        self.sets: dict[str, dict[int | None, tuple[TaskSet, Entry]]] = {}
        #: Per application, its pending priorities by stage, and the other way round.
        self.stage_prios: dict[str, dict[int | None, set[int]]] = {}
        self.prio_stage: dict[str, dict[int, int | None]] = {}
        self.app_group: dict[str, str | None] = {}
        #: Per group (None without groups), its task sets by (stage key, seq, stage),
        #: filed by the shapes they ask for.
        self.members: dict[str | None, ByShape] = {}
        #: With groups: the groups by (group key, name), filed by their sets' shapes.
        self.groups = ByShape()
        self.stale: set[str] | None = set()  # to re-key (None: every application)
        #: Applications that may have stages runnable but not asked for (``hold_s``).
        self.unasked: dict[str, AppView] = {}
        self.last_seq = -1  # the latest application looked at for ``unasked``
        #: Task sets served in a one-offer heartbeat (by application id, stage): filed
        #: again at the next one.
        self.deferred: dict[tuple[str, int | None], None] = {}


class StageOrderingPolicy(Policy[P]):
    """Implement ``stage_key``; optionally ``changed`` (per heartbeat, before any key:
    the task sets new or changed since the last heartbeat, waiting ones included),
    ``resorts`` (whether keys change with each placement), and ``group_of`` with
    ``group_key`` (a first level of groups, e.g. users: the group with the smallest key
    that has a task set with something fitting is served, then its first task set).
    ``hold_s`` comes from the parameters (``StageOrderParams``).

    Keys are kept between heartbeats, each recomputed when its stage changes (its asks or
    its containers; with ``resorts``, after each of its placements, else at the next
    heartbeat): a stage key may depend on its task set alone (its asks' counts, shapes,
    kinds and priorities, its stage's running containers, and what the policy knew when
    it was first keyed), or, with ``keys_follow_app``, on its whole application (the
    asks' hints included); a group key only on the group's
    applications, and the keys of different groups must differ. Keys that depend on more
    need ``rekey()``.
    A placement then costs O(shapes + log task sets). A policy that overrides ``prepare``
    (the older hook, which sees every task set) instead has every key recomputed on every
    heartbeat; so does a heartbeat on which a waiting task set takes part.
    """

    def resorts(self) -> bool:
        """Recompute the keys after every placement (default: no, the keys do not depend
        on placements)."""
        return False

    def keys_follow_app(self) -> bool:
        """Whether a stage key depends on its whole application (e.g. its running
        containers), so that any change of the application re-keys all its task sets
        (default: no, only on its own stage)."""
        return False

    def prepare(self, sets: Sequence[TaskSet], cluster: ClusterView) -> None:
        """Per-heartbeat work before the keys are computed, seeing every task set (e.g. new
        stages arrived). Overriding it makes every heartbeat look at every task set:
        override ``changed`` instead."""

    def changed(
        self, apps: Sequence[AppView] | None, sets: Sequence[TaskSet], cluster: ClusterView
    ) -> None:
        """Per-heartbeat work before any key is computed: ``apps`` changed since the last
        heartbeat (their asks or allocation; ended ones are no longer in
        ``cluster.apps``), ``sets`` their pending task sets and every waiting one, in
        submission order. ``apps`` is None when every key is being recomputed: ``sets`` is
        then every task set."""

    def group_of(self, app: AppView) -> str | None:
        """The group ``app``'s task sets are served in (None: no groups, the default)."""
        return None

    def group_key(self, name: str, cluster: ClusterView) -> Any:
        """The key of group ``name``: smaller first."""
        return 0

    @abstractmethod
    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> Any:
        """Smaller keys are served first. A pure function of the task set and the
        policy's state: a heartbeat may skip the keys of task sets it cannot place (state
        changes belong in ``prepare``)."""

    def rekey(self, *app_ids: str) -> None:
        """Recompute the keys of ``app_ids``' task sets (of every one, without arguments)
        before the next heartbeat's placements."""
        k = self._kept()
        if not app_ids:
            k.stale = None
        elif k.stale is not None:
            k.stale.update(app_ids)

    def _kept(self) -> _Kept:
        k: _Kept | None = self.__dict__.get("_stageorder")
        if k is None:
            k = self.__dict__["_stageorder"] = _Kept()
        return k

    def _grouped(self) -> bool:
        return type(self).group_of is not StageOrderingPolicy.group_of

    def _full_key(self, ts: TaskSet, cluster: ClusterView) -> Any:
        if not self._grouped():
            return self.stage_key(ts, cluster)
        group = self.group_of(ts.app)
        return (self.group_key(group, cluster) if group is not None else None), self.stage_key(
            ts, cluster
        )

    # The heartbeat ------------------------------------------------------------------
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if type(self).prepare is not StageOrderingPolicy.prepare:
            yield from self._rescan(node, cluster)
            return
        if not cluster.pending_apps():
            return
        k = self._kept()
        waiting = self._sync(k, cluster)
        if self.resorts():
            yield from self._serve_slots(k, waiting, node, cluster)
        else:
            yield from self._serve_node(k, waiting, node, cluster)

    def _sync(self, k: _Kept, cluster: ClusterView) -> list[TaskSet]:
        """Brings the kept task sets up to date; returns the waiting task sets, in
        submission order."""
        changed = k.changes.take(cluster)
        hold_s = float(getattr(self.params, "hold_s", 0.0))
        if changed is None or k.stale is None:
            return self._rebuild(k, cluster, hold_s)
        changed.sort(key=_seq)
        by_prio = k.changes.take_priorities()
        whole = by_prio is None or self.keys_follow_app()
        apps = cluster.apps
        fresh: list[tuple[AppView, list[TaskSet], bool]] = []  # (app, sets, all of them)
        sets: list[TaskSet] = []
        for app in changed:
            app_id = app.app_id
            if app.pending <= 0 or app_id not in apps:
                fresh.append((app, [], True))
                continue
            prios = None if whole or by_prio is None else by_prio.get(app_id)
            own = None if prios is None else self._restage(k, app, prios)
            if own is None:
                own = app_sets(app)
                fresh.append((app, own, True))
                sets += own
            else:
                fresh.append((app, own, False))
                sets += [ts for ts in own if ts.priorities]  # not those that left
        waiting: list[TaskSet] = []
        if hold_s > 0:
            waiting = self._waiting(k, changed, cluster, hold_s)
        if waiting or not whole:
            sets = sorted(sets + waiting, key=submission_order)
        self.changed(changed, sets, cluster)
        if k.stale is None:
            return self._rebuild(k, cluster, 0.0, announced=waiting)
        touched: dict[str | None, None] = {}
        for app, own, everything in fresh:
            if everything:
                touched[self._file_app(k, app, own, cluster, True)] = None
            else:
                touched[self._file_sets(k, app, own, cluster)] = None
        if k.stale:
            for app_id in k.stale:
                stale = apps.get(app_id)
                if stale is not None and app_id in k.sets:
                    touched[self._rekey_app(k, stale, cluster)] = None
            k.stale.clear()
        if k.deferred:
            for app_id, stage in k.deferred:
                kept = k.sets.get(app_id)
                found = kept.get(stage) if kept is not None else None
                if found is not None:
                    group = k.app_group[app_id]
                    members = k.members.get(group)
                    if members is None:
                        members = k.members[group] = ByShape()
                    members.put(found[1][-1], found[1], ask_shapes(found[0]))
                    touched[group] = None
            k.deferred.clear()
        for group in touched:
            self._file_group(k, group, cluster, True)
        return waiting

    def _rebuild(
        self, k: _Kept, cluster: ClusterView, hold_s: float, announced: list[TaskSet] | None = None
    ) -> list[TaskSet]:
        """Every task set filed again (``changed`` told of them all, unless ``announced``:
        the waiting sets it was told of)."""
        k.sets.clear()
        k.stage_prios.clear()
        k.prio_stage.clear()
        k.app_group.clear()
        k.members.clear()
        k.groups.clear()
        k.stale = set()
        k.deferred.clear()
        fresh = [(app, app_sets(app)) for app in cluster.pending_apps()]
        if announced is not None:
            waiting = announced
        else:
            k.unasked.clear()
            waiting = []
            if hold_s > 0:
                waiting = self._waiting(k, list(cluster.apps.values()), cluster, hold_s)
            sets = [ts for _, own in fresh for ts in own]
            if waiting:
                sets = sorted(sets + waiting, key=submission_order)
            self.changed(None, sets, cluster)
        for app, own in fresh:
            self._file_app(k, app, own, cluster, True)
        for group in list(k.members):
            self._file_group(k, group, cluster, True)
        return waiting

    def _waiting(
        self, k: _Kept, changed: list[AppView], cluster: ClusterView, hold_s: float
    ) -> list[TaskSet]:
        """The waiting task sets now: looked for among the applications that changed or
        arrived since the last look, and those that still had unasked stages."""
        unasked = k.unasked
        apps = cluster.apps
        for app in changed:
            if app.job is not None and app.app_id in apps and app.unasked_stages():
                unasked[app.app_id] = app
        last = k.last_seq
        newest = last
        # Applications come in submission order: the new ones are at the end.
        newer = reversed(apps.values()) if isinstance(apps, dict) else reversed(list(apps.values()))
        for app in newer:
            if app.seq <= last:
                break
            newest = max(newest, app.seq)
            if app.job is not None and app.unasked_stages():
                unasked[app.app_id] = app
        k.last_seq = newest
        if not unasked:
            return []
        now = cluster.now
        out: list[TaskSet] = []
        for app in sorted(unasked.values(), key=_seq):
            job = app.job
            assert job is not None
            keep = False
            if app.app_id in apps:
                for stage in app.unasked_stages():
                    t = app.stage_runnable_s(stage)
                    if t is None:
                        keep = True  # not runnable yet: may become so without a change
                    elif now - t <= hold_s and 0 <= stage < len(job.stages):
                        spec = job.stages[stage]
                        out.append(TaskSet(app, stage, (), spec.tasks, spec.resources))
                        keep = True
            if not keep:  # every unasked stage's hold is over (time only grows)
                del unasked[app.app_id]
        return out

    def _file_app(
        self, k: _Kept, app: AppView, own: list[TaskSet], cluster: ClusterView, rekey: bool
    ) -> str | None:
        """File ``app``'s task sets ``own`` (re-keyed when ``rekey``, else keeping the
        keys of the stages filed before); returns its group."""
        app_id = app.app_id
        group = k.app_group.get(app_id)
        if group is None and app_id not in k.app_group:
            group = k.app_group[app_id] = self.group_of(app)
        members = k.members.get(group)
        if members is None:
            members = k.members[group] = ByShape()
        old = k.sets.pop(app_id, None)
        new: dict[int | None, tuple[TaskSet, Entry]] = {}
        stage_prios: dict[int | None, set[int]] = {}
        prio_stage: dict[int, int | None] = {}
        for ts in own:
            stage = ts.stage
            stage_prios[stage] = set(ts.priorities)
            for prio in ts.priorities:
                prio_stage[prio] = stage
            before = old.pop(stage, None) if old is not None else None
            if before is None or rekey:
                name = (app_id, stage)
                entry: Entry = (
                    self.stage_key(ts, cluster),
                    app.seq,
                    -1 if stage is None else stage,
                    name,
                )
            else:
                entry = before[1]
            new[stage] = (ts, entry)
            members.put(entry[-1], entry, ask_shapes(ts))
        if old:
            for _, entry in old.values():
                members.remove(entry[-1])
        if new:
            k.sets[app_id] = new
            k.stage_prios[app_id] = stage_prios
            k.prio_stage[app_id] = prio_stage
        else:
            del k.app_group[app_id]
            k.stage_prios.pop(app_id, None)
            k.prio_stage.pop(app_id, None)
        return group

    def _restage(self, k: _Kept, app: AppView, prios: set[int]) -> list[TaskSet] | None:
        """The task sets, now, of the stages of ``app`` that changed at ``prios`` (their
        asks, or their containers), in stage order; an empty one where a stage has no
        asks left. None: ``app`` is not kept (file it whole)."""
        app_id = app.app_id
        stage_prios = k.stage_prios.get(app_id)
        prio_stage = k.prio_stage.get(app_id)
        if stage_prios is None or prio_stage is None:
            return None
        asks = app.asks
        stage_of = app.stage_of
        stages: set[int | None] = set()
        for prio in prios:
            stage = stage_of(prio)  # a container's stage, or an ask's
            stages.add(stage)
            before = prio_stage.get(prio, _UNKEPT)
            if before != _UNKEPT:
                stages.add(before)
                if before != stage or prio not in asks:
                    stage_prios[before].discard(prio)
                    del prio_stage[prio]
            if prio in asks and prio not in prio_stage:
                prio_stage[prio] = stage
                found = stage_prios.get(stage)
                if found is None:
                    stage_prios[stage] = {prio}
                else:
                    found.add(prio)
        out: list[TaskSet] = []
        for stage in sorted(stages, key=_stage_order):
            found = stage_prios.get(stage)
            if found:
                out.append(TaskSet(app, stage, tuple(sorted(found))))
            else:
                stage_prios.pop(stage, None)
                out.append(TaskSet(app, stage, ()))
        return out

    def _file_sets(
        self, k: _Kept, app: AppView, own: list[TaskSet], cluster: ClusterView
    ) -> str | None:
        """File ``app``'s task sets ``own`` (of stages that changed; an empty one leaves)
        with fresh keys, keeping its others; returns its group."""
        app_id = app.app_id
        group = k.app_group[app_id]
        members = k.members.get(group)
        if members is None:  # its sets were all served this heartbeat
            members = k.members[group] = ByShape()
        kept = k.sets[app_id]
        for ts in own:
            stage = ts.stage
            name = (app_id, stage)
            if not ts.priorities:
                if kept.pop(stage, None) is not None:
                    members.remove(name)
                continue
            entry: Entry = (
                self.stage_key(ts, cluster),
                app.seq,
                -1 if stage is None else stage,
                name,
            )
            kept[stage] = (ts, entry)
            members.put(name, entry, ask_shapes(ts))
        if not kept:
            del k.sets[app_id]
            del k.app_group[app_id]
            k.stage_prios.pop(app_id, None)
            k.prio_stage.pop(app_id, None)
        return group

    def _rekey_app(self, k: _Kept, app: AppView, cluster: ClusterView) -> str | None:
        """Every kept task set of ``app`` with a fresh key; returns its group."""
        group = k.app_group[app.app_id]
        members = k.members.get(group)
        if members is None:
            members = k.members[group] = ByShape()
        kept = k.sets[app.app_id]
        for stage, (ts, entry) in kept.items():
            fresh = (self.stage_key(ts, cluster), *entry[1:])
            kept[stage] = (ts, fresh)
            members.put(entry[-1], fresh, ask_shapes(ts))
        return group

    def _file_group(self, k: _Kept, group: str | None, cluster: ClusterView, rekey: bool) -> None:
        members = k.members.get(group)
        if not members:
            k.members.pop(group, None)
            if group is not None:
                k.groups.remove(group)
            return
        if group is None:
            return
        old = k.groups.items.get(group)
        key = (self.group_key(group, cluster), group) if rekey or old is None else old[0]
        k.groups.put(group, key, tuple(members.lists))

    def _first(self, k: _Kept, free: Resources) -> tuple[TaskSet, tuple[Any, ...]] | None:
        """The first task set with an ask that fits ``free``, and its place in the order:
        (its key, seq, stage) as ``_full_key`` would give it."""
        if self._grouped():
            head = k.groups.first(k.groups.fitting(free))
            if head is None:
                return None
            members = k.members[head[-1]]
        else:
            found = k.members.get(None)
            if found is None:
                return None
            members, head = found, None
        entry = members.first(members.fitting(free))
        if entry is None:
            return None
        app_id, stage = entry[-1]
        key = entry[0] if head is None else (head[0], entry[0])
        return k.sets[app_id][stage][0], (key, entry[1], entry[2])

    def _place(self, w: TaskSet, cluster: ClusterView) -> tuple[Any, ...]:
        """A waiting task set's place in the order."""
        return (self._full_key(w, cluster), w.app.seq, -1 if w.stage is None else w.stage)

    def _serve_slots(
        self, k: _Kept, waiting: list[TaskSet], node: NodeView, cluster: ClusterView
    ) -> Iterator[Placement]:
        """Per slot: the first task set with an ask that fits gets its most important
        such ask, and is re-keyed; a waiting task set first in order keeps a slot."""
        held = ZERO
        left = [w.waiting for w in waiting]
        while True:
            free = node.free - held if held is not ZERO else node.free
            found = self._first(k, free)
            if waiting:
                best: tuple[tuple[Any, ...], int] | None = None
                for j, w in enumerate(waiting):
                    if left[j] and w.resources.fits_in(free):
                        place = self._place(w, cluster)
                        if best is None or place < best[0]:
                            best = (place, j)
                if best is not None and (found is None or best[0] < found[1]):
                    held = held + waiting[best[1]].resources
                    left[best[1]] -= 1
                    continue
            if found is None:
                return
            ts = found[0]
            prio = first_fit_priority(ts, free)
            if prio is None:  # cannot happen while the sets are current
                return
            app = ts.app
            yield placement(app.app_id, prio)
            if app.pending > 0 and app.app_id in cluster.apps:
                own = None if self.keys_follow_app() else self._restage(k, app, {prio})
                if own is None:
                    group = self._file_app(k, app, app_sets(app), cluster, True)
                else:
                    group = self._file_sets(k, app, own, cluster)
            else:
                group = self._file_app(k, app, [], cluster, True)
            self._file_group(k, group, cluster, True)

    def _serve_node(
        self, k: _Kept, waiting: list[TaskSet], node: NodeView, cluster: ClusterView
    ) -> Iterator[Placement]:
        """One offer round: in the order of the heartbeat's start, each task set takes
        every slot it can use (beside what the waiting ones before it keep). A task set
        served leaves the order until the next heartbeat."""
        order = sorted((self._place(w, cluster), j) for j, w in enumerate(waiting))
        held = ZERO
        next_w = 0
        while True:
            found = self._first(k, node.free)  # what fits beside ``held`` is among these
            if next_w < len(order) and (found is None or order[next_w][0] < found[1]):
                held = hold_slots(waiting[order[next_w][1]], node.free, held)[0]
                next_w += 1
                continue
            if found is None:
                return
            ts = found[0]
            yield from fill_task_set(ts, node, held)
            app = ts.app
            k.deferred[(app.app_id, ts.stage)] = None
            group = k.app_group[app.app_id]
            k.members[group].remove((app.app_id, ts.stage))
            self._file_group(k, group, cluster, False)

    # Every task set, every heartbeat --------------------------------------------------
    def _rescan(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        """The order computed from every task set, ``prepare`` called first."""
        sets = task_sets(cluster)
        if not sets:
            return
        hold_s = float(getattr(self.params, "hold_s", 0.0))
        if hold_s > 0:
            waiting = waiting_sets(cluster, hold_s)
            if waiting:
                sets = sorted(sets + waiting, key=submission_order)
        self.prepare(sets, cluster)
        yield from serve_in_key_order(
            sets, lambda ts: self._full_key(ts, cluster), self.resorts(), node, cluster
        )


def _seq(app: AppView) -> int:
    return app.seq


def _stage_order(stage: int | None) -> int:
    return -1 if stage is None else stage


#: Not a stage (they are None or >= 0): a priority not kept.
_UNKEPT = -2
