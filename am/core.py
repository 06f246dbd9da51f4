"""The ApplicationMaster core: one job's DAG progress, asks and container launches.

Sans-IO: the host (DES or gRPC runner) calls ``allocate_request(now)``, sends it to the RM,
feeds the response to ``on_allocate_response(resp, now)`` (or tells ``allocate_failed()``
that the call got no answer) and starts the returned launches on their NMs. Tasks of a
stage run when every parent stage is done (a barrier).

Asks go as deltas (YARN's AMRMClientImpl): a request carries the asks of the groups
(``Ask.group``; an ask of group 0 is a group of its own) in which some ask differs, in any
field, from what the RM holds as the AM counts it: the ask last sent at that priority, its
count less the containers granted there since (the RM takes such grants off what it
stores, and nets an ask sent of those it granted unseen, so the two agree). A group with
more than one ask of a non-zero count goes every time (the RM nets unseen grants within a
group most important first, which a kept ask would not get). When nothing differs the
request still carries the first group (an Allocate with asks is a change of demand to the
RM: it refreshes its policy's view of the application). The whole table goes instead
while the AM cannot be sure what the RM holds: after (re-)registration, on the two calls
after one that got no answer (the next may be answered by a replay of the lost answer,
and the RM does not apply the asks of a replayed call) and on the call after a repeated
answer.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Any

from am.asks import AskStrategy, JobProgress, stage_of
from treadle.frozen import slot_setters
from treadle.messages import (
    AllocateRequest,
    AllocateResponse,
    Ask,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
    FinalStatus,
)
from treadle.model import JobSpec
from treadle.resources import ZERO, Resources, total

_COMPLETE = ContainerState.COMPLETE


class _EndedAsks(AskStrategy):
    """The strategy of an AM whose job ended (``ApplicationMaster.release``): no asks."""

    time_invariant = True
    reads_share = False

    def asks(self, progress: JobProgress, now: float) -> list[Ask]:
        return []


_ENDED = _EndedAsks()

_new = object.__new__
_l_id, _l_app, _l_node, _l_res, _l_dur = slot_setters(
    ContainerLaunch, ("container_id", "app_id", "node_id", "resources", "duration_s")
)


def _launch(
    cid: str, app_id: str, node_id: str, res: Resources, duration: float
) -> ContainerLaunch:
    """``ContainerLaunch(cid, app_id, node_id, res, duration)``, faster."""
    x: ContainerLaunch = _new(ContainerLaunch)
    _l_id(x, cid)
    _l_app(x, app_id)
    _l_node(x, node_id)
    _l_res(x, res)
    _l_dur(x, duration)
    return x


def _differs(a: Ask, held: list[Any] | None) -> bool:
    """Whether the RM holds something else than ``a`` (``held``: the ask last sent at its
    priority and its count less the grants since)."""
    if held is None or held[1] != a.count:
        return True
    b: Ask = held[0]
    return b is not a and not (
        b.remaining_work == a.remaining_work
        and b.expected_duration_s == a.expected_duration_s
        and b.kind is a.kind
        and b.group == a.group
        and (b.resources is a.resources or b.resources == a.resources)
        and (b.remaining_usage is a.remaining_usage or b.remaining_usage == a.remaining_usage)
    )


class ApplicationMaster:
    """Drives one job. ``max_task_attempts`` bounds retries of a failed task (YARN: 4).
    ``task_order_seed``: run each stage's tasks in an order drawn from it (default: index
    order). ``whole_table``: send every ask on every call (the same outcome as deltas;
    for tests that compare the two)."""

    #: Send every ask on every call (see ``whole_table``; the class default is for tests
    #: that run a simulator, which builds its AMs itself).
    whole_table: bool = False

    def __init__(
        self,
        job: JobSpec,
        app_id: str,
        strategy: AskStrategy,
        *,
        max_task_attempts: int = 4,
        completed_tasks: Sequence[tuple[int, int]] = (),
        attempt: int = 0,
        task_order_seed: str | None = None,
        whole_table: bool = False,
    ) -> None:
        self._job = job
        self.app_id = app_id
        self.strategy = strategy
        self.attempt = attempt
        self.response_id = 0  # the last Allocate response received
        self.max_task_attempts = max_task_attempts
        n = len(job.stages)
        self._unassigned: list[deque[int]] = [deque(range(s.tasks)) for s in job.stages]
        if task_order_seed is not None:
            # Each stage's tasks in a seeded random order: the first ones launched (a
            # sampling policy's pilots) are a uniform sample of the stage.
            self._unassigned = [
                deque(random.Random(f"{task_order_seed}:{i}").sample(range(s.tasks), s.tasks))
                for i, s in enumerate(job.stages)
            ]
        self._running: list[int] = [0] * n
        # Per stage, container id -> expected end (launch time + duration).
        self._ends: list[dict[str, float]] = [{} for _ in range(n)]
        self._task_events = 0
        self._done: list[int] = [0] * n
        self._done_total = 0
        self._total_tasks = job.tasks
        self._stage_tasks = [s.tasks for s in job.stages]
        self._attempts: dict[tuple[int, int], int] = {}
        self._task_of: dict[str, tuple[int, int]] = {}
        self._parents_left = [len(p) for p in job.parent_indices]
        self._remaining_work = job.work_s
        # Per stage, task-seconds not yet finished; the usage vector is rebuilt from them
        # when a task finishes (at most once per allocate call).
        self._stage_work = [s.work_s for s in job.stages]
        self._usage: Resources | None = None
        # Per stage, its resources x its unfinished task-seconds (None: compute it again).
        self._stage_usage: list[Resources | None] = [None] * n
        self._tasks_left = job.tasks
        self._releases: list[str] = []
        self._newly_done: list[tuple[int, int]] = []
        self._sent: dict[int, int] = {}  # priority -> group of the asks last sent
        if whole_table:
            self.whole_table = True
        # What the RM holds, as the AM counts it: priority -> [the ask last sent there,
        # its count less the containers granted there since]. None: not known (the next
        # request sends the whole table).
        self._held: dict[int, list[Any]] | None = {}
        self._in_flight: list[Ask] | None = None  # the asks of a request not answered yet
        self._in_flight_whole = False  # ... which were the whole table
        self._resend = 0  # the next requests that send the whole table
        # Per stage, the mean duration of its unassigned tasks (None: compute it again).
        self._mean_durations: list[float | None] = [None] * n
        self._runnable: list[int] | None = None  # see ``runnable_stages``
        self.share: Resources | None = None
        self.cluster: Resources = ZERO
        self.failed_reason: str | None = None
        # True while nothing changed since the last request: the last response brought
        # nothing and nothing happened since.
        self._quiet = False
        self._version = 0  # see ``version``
        self._last_asks: list[Ask] | None = None  # what the strategy returned last time
        self._repeat: AllocateRequest | None = None  # the repeat of the last request
        self._repeat_of: list[Ask] | None = None  # the asks it repeats
        #: The last ``allocate_request`` repeats the one before: same asks, nothing
        #: released or finished, nothing received since. Answering it would change
        #: nothing at the RM unless the RM has something new to deliver.
        self.repeats_last_request = False
        for stage, task in completed_tasks:  # a restarted attempt skips finished work
            self._unassigned[stage].remove(task)
            self._mean_durations[stage] = None
            self._runnable = None
            self._task_finished(stage, task)

    def release(self) -> None:
        """Its job ended and its host is done with it: drop what it kept per task, per
        container and per ask, and its strategy (which may hold it: a strategy's memo of
        its progress is a reference cycle, kept until the cyclic collector runs, which
        the simulator pauses). Afterwards only ``app_id``, ``finished``,
        ``final_status``, ``failed_reason`` and ``progress`` may be read."""
        self.strategy = _ENDED
        self._unassigned = []
        self._ends = []
        self._attempts = {}
        self._task_of = {}
        self._held = None
        self._sent = {}
        self._releases = []
        self._newly_done = []
        self._in_flight = self._last_asks = self._repeat_of = None
        self._repeat = None

    # JobProgress ---------------------------------------------------------------------
    @property
    def job(self) -> JobSpec:
        return self._job

    def runnable_stages(self) -> list[int]:
        """(A list kept until a stage starts or stops being runnable: do not change it.)"""
        runnable = self._runnable
        if runnable is None:
            parents_left, unassigned = self._parents_left, self._unassigned
            runnable = self._runnable = [
                i for i in range(len(unassigned)) if parents_left[i] == 0 and unassigned[i]
            ]
        return runnable

    def unassigned(self, stage: int) -> int:
        return len(self._unassigned[stage])

    def unassigned_durations(self, stage: int) -> list[float]:
        return list(map(self._job.stages[stage].durations.__getitem__, self._unassigned[stage]))

    def unassigned_mean_duration(self, stage: int) -> float:
        mean = self._mean_durations[stage]
        if mean is None:
            durations = self.unassigned_durations(stage)
            mean = sum(durations) / len(durations) if durations else 0.0
            self._mean_durations[stage] = mean
        return mean

    def running(self, stage: int) -> int:
        return self._running[stage]

    def running_ends(self, stage: int) -> list[float]:
        return list(self._ends[stage].values())

    def done(self, stage: int) -> int:
        return self._done[stage]

    @property
    def task_events(self) -> int:
        return self._task_events

    @property
    def version(self) -> int:
        return self._version

    @property
    def remaining_work_s(self) -> float:
        return self._remaining_work

    @property
    def remaining_usage(self) -> Resources:
        usage = self._usage
        if usage is None:
            stages = self._job.stages
            parts = self._stage_usage
            terms = []
            for i, w in enumerate(self._stage_work):
                if w > 1e-9:
                    part = parts[i]
                    if part is None:
                        part = parts[i] = stages[i].resources * w
                    terms.append(part)
            usage = total(terms)
            self._usage = usage
        return usage

    # Lifecycle -------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.failed_reason is not None or self._tasks_left == 0

    @property
    def quiet(self) -> bool:
        """Nothing changed since the last request: its response brought nothing (no
        container, no end) and nothing happened since. A host that calls AMs on events
        calls again at once while this is False (the AM has new asks or reports to send)."""
        return self._quiet

    @property
    def final_status(self) -> FinalStatus:
        return FinalStatus.FAILED if self.failed_reason else FinalStatus.SUCCEEDED

    @property
    def progress(self) -> float:
        total = self._total_tasks
        return self._done_total / total if total else 1.0

    def completed_tasks(self) -> list[tuple[int, int]]:
        """(stage, task) pairs done so far: what a new attempt must not redo."""
        out: list[tuple[int, int]] = []
        for i, s in enumerate(self._job.stages):
            waiting = set(self._unassigned[i]) | {
                t for (st, t) in self._task_of.values() if st == i
            }
            out.extend((i, t) for t in range(s.tasks) if t not in waiting)
        return out

    def resync(self) -> None:
        """This attempt registered again (its RM restarted): the next request starts a
        new session (response id 0) and sends the asks afresh; running containers stay
        (a restarted RM recovers them from their nodes)."""
        self.response_id = 0
        self._quiet = False
        self._repeat = None
        self._last_asks = None
        self._version += 1
        self._unsure(1)

    def allocate_failed(self) -> None:
        """The last request got no answer (the call failed): the RM may or may not have
        applied it, and may answer the next call with a replay of its lost answer."""
        self._unsure(2)

    def _unsure(self, calls: int) -> None:
        """The AM cannot tell what the RM holds: the next ``calls`` requests send the
        whole table."""
        self._held = None
        self._in_flight = None
        self._resend = max(self._resend, calls)
        self._quiet = False

    def allocate_request(self, now: float) -> AllocateRequest:
        asks: list[Ask] = [] if self.finished else self.strategy.asks(self, now)
        if self._in_flight is not None:
            self._unsure(2)  # the last request was never answered (a host that did not say)
        if self._quiet and not self._resend:
            last = self._last_asks
            if asks is last or asks == last:
                # Keep the strategy's newest list: a strategy that rebuilt an equal one
                # (its view's version moved) returns that list from now on, and the
                # identity test above then spares comparing every ask on every call.
                self._last_asks = asks
                self.repeats_last_request = True
                # What building it afresh would give: the same asks, nothing to withdraw,
                # nothing released or done, the progress and response id of now (kept while
                # the AM stays quiet: a waiting job repeats itself for many intervals).
                # Nothing received since the last answer: the RM holds every ask as the
                # AM counts it, so the delta is the first group alone.
                req = self._repeat
                if req is None or self._repeat_of is not asks:
                    self._repeat_of = asks
                    req = self._repeat = AllocateRequest(
                        self.app_id,
                        self._delta(asks),
                        [],
                        self.progress,
                        [],
                        self.attempt,
                        self.response_id,
                    )
                return req
        self.repeats_last_request = False
        self._last_asks = asks
        sent: dict[int, Ask] = {}
        for a in asks:
            sent[a.priority] = a
        # Withdraw asks that the strategy no longer makes (in their group: containers
        # granted there since count against the group's other asks).
        if self._sent:
            withdrawn = [Ask(p, ZERO, 0, group=g) for p, g in self._sent.items() if p not in sent]
            if withdrawn:
                asks = asks + withdrawn
        self._sent = {p: a.group for p, a in sent.items() if a.count}
        if self._held is None or self._resend or self.whole_table:
            self._resend = max(0, self._resend - 1)
            self._in_flight_whole = True
        else:
            asks = self._delta(asks)
            self._in_flight_whole = False
        self._in_flight = asks
        releases, self._releases = self._releases, []
        done, self._newly_done = self._newly_done, []
        return AllocateRequest(
            self.app_id,
            asks,
            releases,
            self.progress,
            done,
            self.attempt,
            self.response_id,
        )

    def _delta(self, table: list[Ask]) -> list[Ask]:
        """The asks of ``table`` in the groups where the RM holds something else (all of
        them when they are all the same as held: then the first group)."""
        held = self._held
        if not table or held is None or self.whole_table:
            return table
        keys = [a.group or ~a.priority for a in table]
        if len(set(keys)) == len(table):  # one ask per group (greedy's asks)
            out = [a for a in table if _differs(a, held.get(a.priority))]
            return out if out else table[:1]
        changed: set[int] = set()
        counted: set[int] = set()  # groups with an ask of a non-zero count
        for a, key in zip(table, keys, strict=True):
            if a.count:
                if key in counted:
                    changed.add(key)
                counted.add(key)
            if _differs(a, held.get(a.priority)):
                changed.add(key)
        if not changed:
            changed.add(keys[0])
        return [a for a, key in zip(table, keys, strict=True) if key in changed]

    def on_allocate_response(self, resp: AllocateResponse, now: float) -> list[ContainerLaunch]:
        if resp.response_id and resp.response_id <= self.response_id:
            # An answer we already had (the RM repeated it): it did not apply our asks.
            self._unsure(1)
            return []
        self.response_id = resp.response_id
        self._repeat = None
        sent = self._in_flight
        if sent is not None:
            self._in_flight = None
            held = self._held
            if held is None or self._in_flight_whole:
                held = self._held = {}
            for a in sent:
                held[a.priority] = [a, a.count]
        held = self._held
        if held is not None and resp.allocated:
            for c in resp.allocated:
                h = held.get(c.priority)
                if h is not None:
                    h[1] -= 1
        if resp.share != self.share or resp.cluster is not self.cluster:
            self.share = resp.share
            self.cluster = resp.cluster
            self._version += 1
        for status in resp.completed:
            self._on_completed(status)
        launches: list[ContainerLaunch] = []
        if not resp.allocated:
            self._quiet = not resp.completed and not self._releases and not self._newly_done
            if resp.completed:
                self._version += 1
            return launches
        self._quiet = False
        self._version += 1
        unassigned = self._unassigned
        parents_left = self._parents_left
        stages = self._job.stages
        n = len(unassigned)
        app_id = self.app_id
        finished = self.finished  # only a task's end changes it
        task_of = self._task_of
        running = self._running
        ends = self._ends
        means = self._mean_durations
        for c in resp.allocated:
            cid = c.container_id
            stage = stage_of(c.priority)
            valid = 0 <= stage < n and parents_left[stage] == 0
            queue = unassigned[stage] if valid else None
            if not queue or finished:
                self._releases.append(cid)  # more than we need: give it back
                continue
            task = queue.popleft()
            means[stage] = None
            if not queue:
                self._runnable = None
            task_of[cid] = (stage, task)
            running[stage] += 1
            duration = stages[stage].durations[task]
            ends[stage][cid] = now + duration
            launches.append(_launch(cid, app_id, c.node_id, c.resources, duration))
        return launches

    def on_launch_failed(self, container_id: str) -> None:
        """A container we were given could not be started on its NM: its task goes back to
        the front of its stage's queue and the container is released with the next request.
        A launch failure is not the task's fault, so it does not count as a task attempt."""
        key = self._task_of.pop(container_id, None)
        if key is None:
            return  # unknown, or already reported complete
        self._quiet = False
        self._version += 1
        stage, task = key
        self._running[stage] -= 1
        self._ends[stage].pop(container_id, None)
        self._task_events += 1
        self._unassigned[stage].appendleft(task)
        self._mean_durations[stage] = None
        self._runnable = None
        self._releases.append(container_id)

    def _on_completed(self, status: ContainerStatus) -> None:
        cid = status.container_id
        key = self._task_of.pop(cid, None)
        if key is None:
            return  # a container we released
        stage, task = key
        self._running[stage] -= 1
        self._ends[stage].pop(cid, None)
        self._task_events += 1
        if status.state is _COMPLETE and status.exit_status == 0:
            self._task_finished(stage, task)
            self._newly_done.append(key)
            return
        # Failed, lost or preempted: run the task again (YARN reschedules the attempt).
        attempts = self._attempts.get(key, 0) + (
            0 if status.state is ContainerState.PREEMPTED else 1
        )
        self._attempts[key] = attempts
        if attempts >= self.max_task_attempts:
            self.failed_reason = (
                f"task {task} of stage {self._job.stages[stage].name!r} failed {attempts} times"
            )
            return
        self._unassigned[stage].appendleft(task)
        self._mean_durations[stage] = None
        self._runnable = None

    def _task_finished(self, stage: int, task: int) -> None:
        done = self._done[stage] = self._done[stage] + 1
        self._done_total += 1
        self._tasks_left -= 1
        d = self._job.stages[stage].durations[task]
        self._remaining_work -= d
        self._stage_work[stage] -= d
        self._stage_usage[stage] = None
        self._usage = None
        if done == self._stage_tasks[stage]:
            for child in self._job.children[stage]:
                self._parents_left[child] -= 1
                self._runnable = None
