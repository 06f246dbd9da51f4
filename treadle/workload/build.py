"""From the validated file model to the immutable ``Workload``: the builder's second pass.

It checks what spans several places (references, duplicates, DAG cycles, tasks that fit
no node), numbers the nodes, and expands duration distributions and generators
(``treadle.workload.generators``) into concrete tasks; every problem is a
``WorkloadError`` at a field path. One ``random.Random(seed)`` draws everything, in
declaration order: the explicit jobs (stage by stage, task by task), then each generator.
"""

from __future__ import annotations

import dataclasses
import difflib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from treadle.acl import QueueAcls, user_groups
from treadle.errors import WorkloadError
from treadle.importers.common import describe_resources
from treadle.model import (
    ACCOUNT_ACTIONS,
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    AccountAction,
    ClusterSpec,
    Follow,
    JobSpec,
    NodeSpec,
    QueueSpec,
    StageSpec,
    UserSpec,
    Workload,
    topological_stages,
)
from treadle.registry import did_you_mean
from treadle.resources import Resources
from treadle.workload.errors import join, parse_resources
from treadle.workload.generators import clamp, generate
from treadle.workload.partition import Partitioning, partition_workload
from treadle.workload.schema import (
    MAX_JOBS,
    MAX_NODES,
    MAX_TASKS,
    MAX_TASKS_PER_STAGE,
    AdminFile,
    ClusterFile,
    JobFile,
    StageFile,
    WorkloadFile,
)
from treadle.yamlfile import queue_tree


def build_workload(doc: WorkloadFile, source: str, base_dir: Path, name: str) -> Workload:
    """The workload ``doc`` describes, named ``name``; ``source`` names the file in errors
    and ``base_dir`` anchors the relative paths inside it."""
    return Builder(source, doc, base_dir).build(name)


@dataclass
class Builder:
    """Turns a validated ``WorkloadFile`` into a ``Workload``, checking cross-references."""

    source: str
    doc: WorkloadFile
    base_dir: Path = Path()
    rng: random.Random = field(init=False)
    cluster: ClusterSpec = field(init=False)
    queues: QueueSpec = field(init=False)
    job_names: set[str] = field(default_factory=set)
    tasks: int = 0  # declared and generated so far, against MAX_TASKS
    follows: dict[str, Follow] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.doc.seed)

    def error(self, where: str | None, message: str) -> WorkloadError:
        return WorkloadError(self.source, where, message)

    def count_tasks(self, where: str, n: int) -> None:
        """Count ``n`` more tasks, before their durations are allocated; too many fail."""
        if n > MAX_TASKS_PER_STAGE:
            raise self.error(where, f"{n} tasks in one stage; at most {MAX_TASKS_PER_STAGE}")
        self.tasks += n
        if self.tasks > MAX_TASKS:
            raise self.error(where, f"the workload passes {MAX_TASKS} tasks here; at most that")

    def build(self, name: str) -> Workload:
        if not self.doc.jobs and not self.doc.generators:
            raise self.error(None, "no jobs: add a jobs: list or a generators: list")
        jobs_total = len(self.doc.jobs) + sum(g.count for g in self.doc.generators)
        if jobs_total > MAX_JOBS:
            raise self.error(None, f"{jobs_total} jobs declared and generated; at most {MAX_JOBS}")
        self.cluster = self._cluster(self.doc.cluster)
        self.queues = queue_tree(self.doc.queues, self.source, WorkloadError)
        limits = tuple(
            (u, spec.max_running_apps)
            for u, spec in self.doc.users.items()
            if spec.max_running_apps is not None
        )
        if limits:  # users' maxRunningApps, on the root as an allocation file's
            self.queues = dataclasses.replace(self.queues, user_max_running_apps=limits)
        jobs = [self._job(f"jobs[{i}]", j) for i, j in enumerate(self.doc.jobs)]
        for i, g in enumerate(self.doc.generators):
            where = f"generators[{i}]"
            user = getattr(g, "user", None)
            if user is not None:
                self.check_user(user, f"{where}.user")
            for user in getattr(g, "users", None) or ():
                self.check_user(user, f"{where}.users")
            jobs.extend(generate(self, where, g))
        jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep declaration order
        admin = self._admin(self.doc.admin)
        self._check_accounts(jobs, admin)
        users = {
            u: UserSpec(u, weight=spec.weight, budget=spec.budget, groups=tuple(spec.groups))
            for u, spec in self.doc.users.items()
        }
        self._check_acls(jobs, users)
        try:
            wl = Workload(
                name,
                self.cluster,
                tuple(jobs),
                self.queues,
                users,
                self.doc.seed,
                self.follows,
                admin,
            )
        except ValueError as e:  # the model re-checks; reaching this is a loader bug
            raise self.error(None, str(e)) from None
        p = self.doc.partition
        if p is None:
            return wl
        return partition_workload(wl, Partitioning(p.atr_s, p.rule, p.min_tasks))

    # Cluster ------------------------------------------------------------------------
    def _cluster(self, c: ClusterFile) -> ClusterSpec:
        total = sum(group.count for group in c.nodes)
        if total > MAX_NODES:
            raise self.error("cluster.nodes", f"{total} nodes in all; at most {MAX_NODES}")
        nodes: list[NodeSpec] = []
        counters: dict[str, int] = {}
        ids: set[str] = set()
        for i, group in enumerate(c.nodes):
            where = f"cluster.nodes[{i}]"
            res = parse_resources(group.resources, self.source, f"{where}.resources")
            for _ in range(group.count):
                counters[group.name] = counters.get(group.name, 0) + 1
                node_id = f"{group.name}{counters[group.name]}"
                if node_id in ids:
                    raise self.error(f"{where}.name", f"node id {node_id!r} is already taken")
                ids.add(node_id)
                nodes.append(NodeSpec(node_id, res, group.rack))
        return ClusterSpec(tuple(nodes), c.heartbeat_s, c.scheduling)

    # Accounts -----------------------------------------------------------------------
    def _admin(self, declared: list[AdminFile]) -> tuple[AccountAction, ...]:
        out: list[AccountAction] = []
        for i, a in enumerate(declared):
            queue = self.check_queue(a.queue, f"admin[{i}].queue")
            for action in ACCOUNT_ACTIONS:
                amount = getattr(a, action)
                if amount is not None:
                    out.append(AccountAction(a.at_s, queue, action, float(amount)))
        out.sort(key=lambda a: a.at_s)  # stable: ties keep declaration order
        return tuple(out)

    def _check_accounts(self, jobs: list[JobSpec], admin: tuple[AccountAction, ...]) -> None:
        """A queue the run changes (timeline, per-job rates) declares its whole account:
        the live driver can only set both values at once, and a boost needs a rate to
        return to."""
        leaves = {q.name: q for q in self.queues.walk() if q.is_leaf}
        named = [(f"admin[{i}]", a.queue) for i, a in enumerate(self.doc.admin)]
        boosted = [j for j in jobs if j.spending_rate is not None]
        named += [(f"job {j.name!r} spending_rate", j.queue) for j in boosted]
        for where, queue in named:
            q = leaves[queue]
            if q.budget is None or q.spending_rate is None:
                raise self.error(
                    where,
                    f"changes the account of queue {queue!r}, which must declare both "
                    "budget and spending_rate",
                )

    def _check_acls(self, jobs: list[JobSpec], users: dict[str, UserSpec]) -> None:
        """A job goes to a queue whose ACLs admit its user (``treadle.acl``): the RM would
        refuse it, so the workload cannot be run as written."""
        acls = QueueAcls(self.queues, user_groups(users))
        if not acls.enabled:
            return
        for j in jobs:
            refusal = acls.submit_refusal(j.user, j.queue)
            if refusal is not None:
                raise self.error(f"job {j.name!r}", f"{refusal} (the RM would refuse it)")

    def check_queue(self, queue: str | None, where: str) -> str:
        leaves = {q.name: q for q in self.queues.walk() if q.name != ROOT_QUEUE}
        leaf_names = join([n for n, q in leaves.items() if q.is_leaf])
        name = queue or DEFAULT_QUEUE
        if name not in leaves:
            problem = f"unknown queue {name!r}" if queue else "no queue given and none is 'default'"
            leaf = [n for n, q in leaves.items() if q.is_leaf]
            hint = did_you_mean(name, leaf) if queue else ""
            raise self.error(where, f"{problem}; leaf queues: {leaf_names}{hint}")
        if not leaves[name].is_leaf:
            raise self.error(
                where, f"queue {name!r} has child queues; jobs go to leaf queues: {leaf_names}"
            )
        return name

    def check_user(self, user: str, where: str) -> None:
        """A user the ``users`` mapping does not declare takes the defaults, unless its name
        is a near miss of a declared one (a typo): that is an error. Names that differ only
        in digits (``user_1``, ``user_10``) are a family, not a typo."""
        declared = self.doc.users
        if not declared or user in declared:
            return
        for close in difflib.get_close_matches(user, list(declared), n=3, cutoff=0.8):
            if _digitless(close) != _digitless(user):
                raise self.error(
                    where,
                    f"user {user!r} is not declared in users ({join(list(declared))}); "
                    f"did you mean {close!r}? (declare {user!r} to add a user)",
                )

    # Jobs ---------------------------------------------------------------------------
    def claim_job_name(self, name: str, where: str) -> None:
        if name in self.job_names:
            raise self.error(where, f"duplicate job name {name!r}")
        self.job_names.add(name)

    def _job(self, where: str, j: JobFile) -> JobSpec:
        self.claim_job_name(j.name, f"{where}.name")
        queue = self.check_queue(j.queue, f"{where}.queue")
        self.check_user(j.user, f"{where}.user")
        stages = self.stages(where, j.stages)
        return JobSpec(j.name, j.user, j.submit_s, stages, queue, j.spending_rate)

    def stages(self, where: str, declared: list[StageFile]) -> tuple[StageSpec, ...]:
        names = [s.name for s in declared]
        specs: list[StageSpec] = []
        for k, s in enumerate(declared):
            at = f"{where}.stages[{k}]"
            if s.name in names[:k]:
                raise self.error(f"{at}.name", f"duplicate stage name {s.name!r}")
            self._check_parents(s, names, f"{at}.after")
            self.count_tasks(f"{at}.tasks", s.tasks)
            res = self._task_resources(s.resources, f"{at}.resources")
            specs.append(
                StageSpec(s.name, res, self._durations(s, f"{at}.duration_s"), tuple(s.after))
            )
        try:
            return topological_stages(specs)
        except ValueError as e:
            raise self.error(f"{where}.stages", str(e)) from None

    def _check_parents(self, s: StageFile, names: list[str], where: str) -> None:
        for p in s.after:
            if p not in names:
                raise self.error(where, f"unknown stage {p!r}; stages: {join(names)}")
            if s.after.count(p) > 1:
                raise self.error(where, f"stage {p!r} is listed twice")

    def _task_resources(self, values: Mapping[str, float], where: str) -> Resources:
        res = parse_resources(values, self.source, where)
        if not self.cluster.fits_some_node(res):
            on_nodes = list(self.cluster.capacity)
            for name in res:
                if name not in on_nodes and res[name] > 0:
                    raise self.error(
                        f"{where}.{name}",
                        f"no node has resource {name!r} (the nodes have "
                        f"{join(on_nodes)}){did_you_mean(name, on_nodes)}",
                    )

            raise self.error(
                where,
                f"a task needs {describe_resources(res)} and fits no node; the largest node "
                f"has {describe_resources(self.cluster.largest_node())}",
            )
        return res

    def _durations(self, s: StageFile, where: str) -> tuple[float, ...]:
        spec = s.duration_s
        if isinstance(spec, list):
            if len(spec) != s.tasks:
                raise self.error(where, f"has {len(spec)} values but the stage has {s.tasks} tasks")
            return tuple(float(d) for d in spec)
        if isinstance(spec, int | float):
            return (float(spec),) * s.tasks
        return tuple(clamp(spec.draw(self.rng)) for _ in range(s.tasks))


def _digitless(name: str) -> str:
    return re.sub(r"\d+", "", name)
