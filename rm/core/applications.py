"""Applications through their life, RM side: submission (YARN's ClientRMService), AM
attempts and their Register/Allocate/Finish calls (ApplicationMasterService), attempt
expiry and retries (the AMLivelinessMonitor), and the end of an application."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from rm.core.blinding import blind_ask, blind_job
from rm.core.containers import ContainerLifecycle
from rm.core.effects import Outbox
from rm.core.ended import EndedApp, retain
from rm.core.netting import net_of_undelivered, same_but_hints, validate_asks
from rm.core.queues import Queue
from rm.core.scheduling import Scheduler
from rm.core.state import AM_PRIORITY, Application, AppRecord, AppState, ClusterState
from treadle.errors import ConflictError, InvalidRequestError, NotFoundError
from treadle.events import EventLog
from treadle.messages import (
    AllocateRequest,
    AllocateResponse,
    AmRegistration,
    AppSubmission,
    Ask,
    ContainerState,
    FinalStatus,
)
from treadle.resources import Resources
from treadle.yarnids import (
    SIM_CLUSTER_TIMESTAMP,
    AppId,
    app_or_none,
    container_prefix,
    format_app_id,
)

_PREEMPTED = ContainerState.PREEMPTED

_END_STATE = {
    FinalStatus.SUCCEEDED: AppState.FINISHED,
    FinalStatus.FAILED: AppState.FAILED,
    FinalStatus.KILLED: AppState.KILLED,
}


class Applications:
    def __init__(
        self,
        state: ClusterState,
        log: EventLog,
        containers: ContainerLifecycle,
        scheduler: Scheduler,
        outbox: Outbox,
        *,
        am_expiry_s: float,
        max_am_attempts: int,
        am_resources: Resources,
        max_completed: int | None = None,
        cluster_ts: int = SIM_CLUSTER_TIMESTAMP,
    ) -> None:
        if max_am_attempts < 1:
            raise ValueError("max_am_attempts must be >= 1")
        self._state = state
        self._log = log
        self._containers = containers
        self._scheduler = scheduler
        self._outbox = outbox
        self.am_expiry_s = am_expiry_s
        self.max_am_attempts = max_am_attempts
        self.am_resources = am_resources
        self._seq = 0
        #: The RM's cluster timestamp (ms) and epoch (its restarts): the ids it hands out
        #: (``treadle.yarnids``).
        self.cluster_ts = cluster_ts
        self.rm_epoch = 0
        #: How many ended applications are kept (``rm.core.ended``; None: all).
        self.max_completed = max_completed
        #: Ended applications dropped since the host last took them (``take_dropped``).
        self.dropped: list[str] = []
        #: Ids handed out ahead of their submission (YARN's new-application): id -> seq.
        self._reserved: dict[str, int] = {}
        #: Attempts failed through no fault of the AM since this RM started (a state store
        #: writes such a failure at once: it must not count after a restart either).
        self.uncounted_failures = 0
        #: Hide true durations from the policy (``rm.core.blinding``).
        self.blind = not scheduler.policy.uses_oracle()

    @property
    def next_seq(self) -> int:
        """The sequence number the next submission gets (its id's number: ``next_seq + 1``)."""
        return self._seq

    def skip_ids(self, next_seq: int) -> None:
        """Hand out no id numbered below ``next_seq + 1``: a previous run of this RM
        did, or logged it (``ResourceManager.restore``)."""
        self._seq = max(self._seq, next_seq)

    def take_dropped(self) -> list[str]:
        """The ended applications dropped since the last call (their rows go from the
        state store, their tokens from the gate)."""
        out, self.dropped = self.dropped, []
        return out

    def _retain(self) -> None:
        self.dropped += retain(self._state.finished, self.max_completed)

    def running(self, app_id: str) -> Application:
        app = self._state.apps.get(app_id)
        if app is None:
            if app_id in self._state.finished:
                raise ConflictError(f"application {app_id!r} has already finished")
            raise NotFoundError(f"unknown application {app_id!r}")
        return app

    # ------------------------------------------------------------------ clients
    def reserve_id(self) -> str:
        """An id for a submission to come (YARN's new-application); one never used is a gap
        in the numbering, as in YARN."""
        seq = self._seq
        self._seq += 1
        app_id = format_app_id(self.cluster_ts, seq + 1)
        self._reserved[app_id] = seq
        return app_id

    def submit(self, sub: AppSubmission, now: float, reserved_id: str = "") -> str:
        """Submit ``sub`` under a fresh id, or under ``reserved_id`` (``reserve_id``)."""
        st = self._state
        if reserved_id and reserved_id not in self._reserved:
            raise InvalidRequestError(
                f"application id {reserved_id!r} was not handed out by new-application, "
                "or it was used already"
            )
        queue = st.queues.get(sub.queue)
        if queue is None:
            raise InvalidRequestError(f"unknown queue {sub.queue!r}")
        if not queue.is_leaf:
            raise InvalidRequestError(f"queue {sub.queue!r} is not a leaf queue")
        if not sub.user:
            raise InvalidRequestError("user must not be empty")
        a = sub.alone_jct_s
        if a is not None and not (math.isfinite(a) and a >= 0):
            raise InvalidRequestError(f"alone_jct_s must be a finite number >= 0, got {a}")
        if reserved_id:
            app_id, seq = reserved_id, self._reserved.pop(reserved_id)
        else:
            seq = self._seq
            self._seq += 1
            app_id = format_app_id(self.cluster_ts, seq + 1)
        st.now = now  # the policy's on_app_added sees the submission's time
        app = Application(app_id, seq, sub, now)
        self._number_containers(app)
        if self.blind and app.job is not None:
            app.job = blind_job(app.job)
        st.add_app(app)
        self._log.job_submitted(
            now, app_id, sub.name, sub.user, sub.queue, sub.tasks, sub.alone_jct_s
        )
        self._scheduler.policy.on_app_added(app, st)
        full = _queue_full(st, queue, getattr(queue.spec, "maximum_applications", None))
        if full is not None:
            self.finish(app_id, FinalStatus.FAILED, now, f"{full}: {app_id}")
        elif sub.managed_am:
            self._ask_am_container(app)
        return app_id

    def move(self, app_id: str, queue: str, now: float) -> str:
        """Move a running application to another leaf queue (YARN's moveApplicationAcrossQueues)
        unless the policy refuses (``Policy.refuse_move``); the policy hears of it
        (``Policy.on_app_moved``). Returns the queue it left."""
        st = self._state
        app = self.running(app_id)
        target = st.queues.get(queue)
        if target is None:
            raise InvalidRequestError(f"unknown queue {queue!r}")
        if not target.is_leaf:
            raise InvalidRequestError(f"queue {queue!r} is not a leaf queue")
        old = app.queue
        if old == queue:
            return old
        st.now = now  # the policy sees the move's time
        refused = self._scheduler.policy.refuse_move(app, queue, st)
        if refused:
            raise InvalidRequestError(f"moving {app_id} to queue {queue!r}: {refused}")
        _move_books(st, app, queue)
        sub = app.submission
        real = sub.job if sub.job is None else dataclasses.replace(sub.job, queue=queue)
        app.submission = dataclasses.replace(sub, queue=queue, job=real)  # what a restart reads
        if app.job is not None:
            app.job = dataclasses.replace(app.job, queue=queue)
        self._scheduler.policy.on_app_moved(app, old, st)
        return old

    def restore(self, rec: AppRecord, now: float, rm_epoch: int) -> None:
        """An application from the state store, after an RM restart: an ended one as it
        ended; a running one with its attempt, its done tasks and no containers (its AM
        asks again for what it still needs). An unmanaged AM attempt continues (its AM
        registers again and has the attempt's expiry to do so); a managed AM's container
        went with the NMs' resync, so it gets a new one."""
        st = self._state
        self._seq = max(self._seq, rec.seq + 1)
        self.rm_epoch = rm_epoch
        if rec.state is not AppState.RUNNING:
            st.finished[rec.app_id] = _ended(rec)
            self._retain()
            return
        app = Application(rec.app_id, rec.seq, rec.submission, rec.submit_s)
        if self.blind and app.job is not None:
            app.job = blind_job(app.job)
        app.attempt = rec.attempt
        app.uncounted_attempts = rec.uncounted_attempts
        app.done_tasks = dict.fromkeys(rec.done_tasks)
        app.progress = rec.progress
        app.diagnostics = rec.diagnostics
        st.add_app(app)
        app.am_last_seen_s = now
        self._scheduler.policy.on_app_added(app, st)
        if app.managed_am:
            self._ask_am_container(app)
        else:
            app.am_registered = rec.am_registered
            self._number_containers(app)

    def finish(
        self, app_id: str, status: FinalStatus, now: float, diagnostics: str = "", attempt: int = 0
    ) -> None:
        """End an application. ``attempt`` (when given) must be the current AM attempt."""
        st = self._state
        st.now = now
        app = self.running(app_id)
        if attempt:
            self._check_attempt(app, attempt)
        if diagnostics:
            app.diagnostics = diagnostics
        app.finish_s = now
        for c in list(app.containers.values()):
            # Containers still held by a finished application are killed (YARN does too).
            self._containers.release(c, now, killed=True)
        self._clear_asks(app)
        st.ledger.forget(app)  # else the ledger would keep the ended ``app`` to the end
        app.state = _END_STATE[status]
        if status is FinalStatus.SUCCEEDED:
            app.progress = 1.0
        del st.apps[app_id]
        st.tell(app_id)
        st.finished[app_id] = _ended(app)  # its job, asks, tasks go with ``app``
        st.version += 1
        if status is FinalStatus.SUCCEEDED:
            self._log.job_finished(now, app_id, app.user, app.queue)
        else:
            self._log.job_failed(now, app_id, app.user, app.queue, str(status), app.diagnostics)
        self._scheduler.policy.on_app_removed(app, st)
        self._retain()

    # ------------------------------------------------------------------ AM attempts
    def _number_containers(self, app: Application) -> None:
        """Name the containers granted from now on after the attempt they belong to (the
        current one once its AM registered, else the one to come) and this RM's epoch, as
        YARN does (``treadle.yarnids``): each attempt's start again at 000001 (the AM's),
        and those of an earlier RM's epoch are never named again."""
        attempt = app.attempt if app.am_registered else app.attempt + 1
        key = app_or_none(app.app_id) or AppId(self.cluster_ts, app.seq + 1)
        prefix = container_prefix(key, attempt, self.rm_epoch)
        if prefix != app._cid_prefix:
            app._cid_prefix = prefix
            app.next_container = 1

    def _ask_am_container(self, app: Application) -> None:
        self._number_containers(app)
        was_pending = app.pending > 0
        app.set_ask(Ask(AM_PRIORITY, self.am_resources, 1))
        pending = self._state.pending
        if not pending.narrow(self.am_resources):
            pending.epoch += 1
        pending.update(app, was_pending, (AM_PRIORITY,))

    def register_am(self, app_id: str, now: float) -> AmRegistration:
        app = self.running(app_id)
        if not app.am_registered:
            app.attempt += 1
            app.am_registered = True
            self._number_containers(app)
            app.response_id = 0
            app.last_response = None
            self._log.attempt_started(now, app_id, app.attempt)
        else:
            # The attempt's AM registers again (its RM restarted, or it lost track of
            # the response ids): its session starts afresh.
            app.response_id = 0
            app.last_response = None
        app.am_last_seen_s = now
        return AmRegistration(
            app.attempt,
            tuple(app.done_tasks),
            app.submission.job,  # the real job (``app.job`` may be blinded)
            app.user,
            app.queue,
            app.submission.ask_strategy,
            app.submission.ask_params_json,
        )

    def expire_attempts(self, now: float, grace_s: float = 0.0) -> list[str]:
        """Fail AM attempts that have not called Allocate within the expiry plus
        ``grace_s``."""
        limit = self.am_expiry_s + grace_s
        late = [
            a.app_id
            for a in self._state.apps.values()
            if a.am_registered and now - a.am_last_seen_s > limit
        ]
        for app_id in late:
            self.fail_attempt(app_id, f"AM missed Allocate calls for {self.am_expiry_s:g} s", now)
        return late

    def overdue_attempts(self, now: float) -> list[tuple[str, float]]:
        """AM attempts silent for longer than the expiry, with their last call."""
        limit = self.am_expiry_s
        return [
            (a.app_id, a.am_last_seen_s)
            for a in self._state.apps.values()
            if a.am_registered and now - a.am_last_seen_s > limit
        ]

    def fail_attempt(self, app_id: str, reason: str, now: float, *, counts: bool = True) -> None:
        """The current AM attempt died: kill its containers; retry or fail the application.
        Only attempts that ``counts`` (not those whose AM container's node was lost or
        that were preempted: YARN-614) use up the ``max_am_attempts``."""
        app = self.running(app_id)
        if app.managed_am and not app.am_registered:
            # YARN's attempt starts when the RM launches its AM container: one whose AM
            # died before registering is spent too (else an AM that cannot start is
            # retried for ever).
            app.attempt += 1
        if not counts:
            app.uncounted_attempts += 1
            self.uncounted_failures += 1
        self._log.attempt_failed(now, app_id, app.attempt, reason)
        for c in list(app.containers.values()):
            self._containers.release(c, now, killed=True)
        self._clear_asks(app)
        app.undelivered = []
        app.completed_reports = []
        app.am_registered = False
        self._number_containers(app)
        self._state.tell(app_id)
        app.am_container = None
        if app.attempt - app.uncounted_attempts >= self.max_am_attempts:
            app.diagnostics = f"attempt {app.attempt} failed: {reason}"
            self.finish(app_id, FinalStatus.FAILED, now)
        elif app.managed_am:
            self._ask_am_container(app)

    def settle_am_exits(self, now: float) -> None:
        """AM containers that ended during the call (``ContainerLifecycle``) fail their
        attempts, once the call's other work is done (the completions of the same
        heartbeat, the other containers of a lost node); that may end their applications
        or ask for new AM containers."""
        exits = self._outbox.am_exits
        apps = self._state.apps
        while exits:
            app_id, reason, counts = exits.pop(0)
            if app_id in apps:
                self.fail_attempt(app_id, reason, now, counts=counts)

    def _clear_asks(self, app: Application) -> None:
        was_pending = app.pending > 0
        app.clear_asks()
        self._state.pending.update(app, was_pending)

    def _check_attempt(self, app: Application, attempt: int) -> None:
        if not app.am_registered:
            raise ConflictError(f"application {app.app_id!r} has no registered AM attempt")
        if attempt and attempt != app.attempt:
            raise ConflictError(
                f"application {app.app_id!r}: attempt {attempt} was replaced by {app.attempt}"
            )

    # ------------------------------------------------------------------ Allocate
    def allocate(
        self,
        req: AllocateRequest,
        now: float,
        place: Callable[[float], None] | None = None,
    ) -> AllocateResponse:
        """``place`` (live event mode): a placement pass run once the call's asks are in,
        so that its answer carries what it placed."""
        st = self._state
        st.now = now
        app = self.running(req.app_id)
        self._check_attempt(app, req.attempt)
        app.am_last_seen_s = now
        rid = req.response_id
        if rid is not None and app.last_response is not None and rid + 1 == app.response_id:
            # The AM did not get our last answer: send it again. Releases and finished
            # tasks are idempotent and applied; asks were counted without that answer's
            # grants, so they wait for the AM's next call.
            self._apply_releases(app, req.releases, now)
            for task in req.completed_tasks:
                app.done_tasks[task] = None
            return app.last_response
        if rid is not None and rid != app.response_id:
            raise ConflictError(
                f"application {req.app_id!r}: allocate out of sync (response id "
                f"{rid}, expected {app.response_id}); register again"
            )
        validate_asks(req.asks, st.largest_node())
        for task in req.completed_tasks:
            app.done_tasks[task] = None
        self._apply_releases(app, req.releases, now)
        if req.asks:
            moved = app.stage_book.asked(req.asks, now)
            pending = st.pending
            was_pending = app.pending > 0
            blind = self.blind
            changed: list[int] = []  # where more than the hints changed
            kept = app.asks
            narrowed: Resources | None = None  # the bound covers it already
            for ask in net_of_undelivered(req.asks, app.undelivered):
                was = kept.get(ask.priority)
                if was is None:
                    if ask.count:
                        changed.append(ask.priority)
                elif was is not ask and not same_but_hints(was, ask):
                    changed.append(ask.priority)
                elif blind:
                    continue  # it holds that ask already (its hints hidden)
                if blind:
                    ask = blind_ask(ask)
                app.set_ask(ask)
                if ask.count:
                    res = ask.resources
                    if res is not narrowed and (narrowed is None or res != narrowed):
                        pending.narrow(res)
                        narrowed = res
            # A priority that moved to another stage moves its containers: say "any".
            pending.update(app, was_pending, None if moved else changed)
            st.version += 1  # demand changed: shares may too
        app.progress = req.progress
        if place is not None and st.pending.apps:
            place(now)
        completed = app.completed_reports
        resp = AllocateResponse(
            allocated=app.undelivered,
            completed=completed,
            # YARN's PreemptionMessage: the containers the RM took back (already ended).
            preempted=[s.container_id for s in completed if s.state is _PREEMPTED]
            if completed
            else [],
            share=self._scheduler.share_of(app.app_id),
            cluster=st.capacity,
            num_nodes=st.live_nodes,
        )
        app.undelivered = []
        app.completed_reports = []
        app.response_id += 1
        resp.response_id = app.response_id
        app.last_response = resp
        return resp

    def _apply_releases(self, app: Application, releases: Sequence[str], now: float) -> None:
        for cid in releases:
            c = app.containers.get(cid)
            if c is not None and cid != app.am_container:
                self._containers.release(c, now)


def _queue_full(st: ClusterState, queue: Queue, limit: int | None) -> str | None:
    """Why leaf ``queue`` refuses the application just added (its ``maximum_applications``
    reached, as YARN's ``LeafQueue.validateSubmitApplication``); None: it takes it."""
    if limit is None:
        return None
    held = sum(1 for a in st.apps.values() if a.queue == queue.name)
    if held <= limit:
        return None
    return (
        f"Queue {queue.path} already has {held - 1} applications, "
        "cannot accept submission of application"
    )


def _ended(app: Application | AppRecord) -> EndedApp:
    """What is kept of an ended application (``rm.core.ended``): of ``app`` itself, which
    just ended, or of its record in the state store."""
    out = EndedApp(app.app_id, app.seq, app.submission, app.state, app.submit_s, app.finish_s)
    out.progress = app.progress
    out.attempt = app.attempt
    out.diagnostics = app.diagnostics
    out.am_registered = app.am_registered
    out.uncounted_attempts = app.uncounted_attempts
    if isinstance(app, Application):
        out.am_container = app.am_container
    return out


def _move_books(st: ClusterState, app: Application, queue: str) -> None:
    """Move ``app`` to the leaf ``queue``: what its containers hold leaves the books of its
    old queue and their ancestors for the new ones'. Deferred books are brought up to
    date and kept at once from then on (exact either way, ``rm.core.books``)."""
    held = app.allocated
    if app.containers:
        st.ledger.stop()
    user_book, *queue_books = app.books
    for b in queue_books:
        b.sub(held)
    app.queue = queue
    books = [user_book]
    q = st.queues.get(queue)
    while q is not None:
        books.append(q._used)
        q = q.parent
    for b in books[1:]:
        b.add(held)
    app.books = tuple(books)
    app._all_books = (app._allocated, *app.books)
    st.version += 1
