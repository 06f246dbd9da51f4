"""What the RM knows: nodes, applications, queues and users, and the books that total
their usage. Policies see these objects through the read-only views of ``rm.policy``.

Every container counts in its node's free space and in its application's books (the
application's own total, its user's, its leaf queue's and each ancestor's; the root
queue's total is the cluster's). Placing and freeing a container updates them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from rm.core.books import Book, BookLedger
from rm.core.ended import AppState as AppState, EndedApp  # AppState re-exported
from rm.core.netting import ask_with_count
from rm.core.pending import PendingIndex
from rm.core.queues import Queue, User, build_queues
from rm.core.stagebook import StageBook
from treadle.frozen import slot_setters
from treadle.messages import (
    AllocateResponse,
    AppSubmission,
    Ask,
    Container,
    ContainerStatus,
    NodeRegistration,
)
from treadle.model import JobSpec, QueueSpec, UserSpec
from treadle.resources import ZERO, Accumulator, Resources

#: The priority of the RM's own ask for a managed AM's container (served before tasks).
AM_PRIORITY = -1

_new = object.__new__
_c_id, _c_app, _c_node, _c_prio, _c_res, _c_kind = slot_setters(
    Container, ("container_id", "app_id", "node_id", "priority", "resources", "kind")
)


class Node:
    """A node as the RM sees it (a NodeView for policies)."""

    __slots__ = (
        "_free",
        "address",
        "alive",
        "capacity",
        "containers",
        "last_heartbeat_s",
        "last_seq",
        "node_id",
        "rack",
        "to_stop",
    )

    def __init__(self, reg: NodeRegistration, now: float) -> None:
        self.node_id = reg.node_id
        self.rack = reg.rack
        self.address = reg.address
        self.capacity = reg.resources
        self._free = Accumulator(reg.resources)
        self.containers: dict[str, Container] = {}
        self.last_seq = -1
        self.last_heartbeat_s = now
        self.alive = True
        self.to_stop: list[str] = []

    @property
    def free(self) -> Resources:
        return self._free.value

    @property
    def used(self) -> Resources:
        return self.capacity - self._free.value

    @property
    def num_containers(self) -> int:
        return len(self.containers)


class Application:
    """An application as the RM sees it (an AppView for policies)."""

    __slots__ = (
        "_all_books",
        "_allocated",
        "_book_n",
        "_book_shape",
        "_cid_prefix",
        "_demand",
        "_sorted_asks",
        "alone_jct_s",
        "am_container",
        "am_last_seen_s",
        "am_registered",
        "app_id",
        "asks",
        "attempt",
        "books",
        "completed_reports",
        "containers",
        "diagnostics",
        "done_tasks",
        "finish_s",
        "job",
        "last_response",
        "managed_am",
        "name",
        "next_container",
        "pending",
        "progress",
        "queue",
        "response_id",
        "seq",
        "stage_book",
        "started",
        "state",
        "submission",
        "submit_s",
        "tasks",
        "uncounted_attempts",
        "undelivered",
        "user",
    )

    def __init__(self, app_id: str, seq: int, sub: AppSubmission, now: float) -> None:
        self.app_id = app_id
        self.seq = seq
        self._cid_prefix = ""  # the containers' ids: ``Applications._number_containers``
        self.name = sub.name
        self.user = sub.user
        self.queue = sub.queue
        self.tasks = sub.tasks
        self.alone_jct_s = sub.alone_jct_s
        self.submit_s = now
        self.state = AppState.RUNNING
        self.asks: dict[int, Ask] = {}
        #: Caches of ``asks`` (None when they changed): ``sorted_asks()``, ``demand``.
        self._sorted_asks: list[Ask] | None = None
        self._demand: Resources | None = None
        self.pending = 0
        self._allocated = Accumulator()
        #: Usage totals this app's containers count in (user, queue path up to the root).
        self.books: tuple[Accumulator, ...] = ()
        #: ``_allocated`` and ``books``: everything a container of this app counts in.
        self._all_books: tuple[Accumulator, ...] = (self._allocated,)
        #: Changes of its books not made yet (``rm.core.books``): in containers of one shape.
        self._book_shape: Resources | None = None
        self._book_n = 0
        self.containers: dict[str, Container] = {}
        self.undelivered: list[Container] = []
        self.completed_reports: list[ContainerStatus] = []
        self.next_container = 1
        self.started = False
        self.progress = 0.0
        self.job = sub.job
        self.submission = sub
        self.managed_am = sub.managed_am
        self.attempt = 0  # AM attempts started so far
        #: Of those, the ones that failed through no fault of the AM (its container's node
        #: lost, or preempted): they do not count towards the maximum (YARN-614).
        self.uncounted_attempts = 0
        self.am_registered = False
        self.am_last_seen_s = now
        self.am_container: str | None = None
        self.done_tasks: dict[tuple[int, int], None] = {}  # ordered set
        self.diagnostics = ""
        self.finish_s: float | None = None
        self.response_id = 0
        self.last_response: AllocateResponse | None = None
        self.stage_book = StageBook(sub.job, now)

    @property
    def allocated(self) -> Resources:
        return self._allocated.value

    @property
    def awaiting_am(self) -> bool:
        """Running, unmanaged, and no AM attempt registered: an AM host should start one."""
        return self.state is AppState.RUNNING and not self.am_registered and not self.managed_am

    @property
    def running(self) -> int:
        return len(self.containers)

    @property
    def demand(self) -> Resources:
        out = self._demand
        if out is None:
            out = ZERO
            for a in self.asks.values():
                out = out + a.resources * a.count
            self._demand = out
        return out

    def sorted_asks(self) -> list[Ask]:
        if self._sorted_asks is None:
            self._sorted_asks = [self.asks[p] for p in sorted(self.asks)]
        return self._sorted_asks

    def stage_of(self, priority: int) -> int | None:
        return self.stage_book.stages.get(priority)

    def stage_running(self, stage: int) -> int:
        return self.stage_book.running(self.containers, stage)

    def stage_runnable_s(self, stage: int) -> float | None:
        return self.stage_book.runnable_s(stage)

    def unasked_stages(self) -> list[int]:
        return list(self.stage_book.unasked)

    def set_ask(self, ask: Ask) -> None:
        old = self.asks.get(ask.priority)
        if old is not None:
            self.pending -= old.count
        if ask.count > 0:
            self.asks[ask.priority] = ask
            self.pending += ask.count
        elif old is not None:
            del self.asks[ask.priority]
        self._sorted_asks = self._demand = None

    def grant(self, ask: Ask, node_id: str) -> Container:
        """One container of ``ask`` (one of this application's) granted on ``node_id``:
        the new container (its AM's own, or one for the AM to hear of), and the ask one
        fewer. The application stays pending unless that was its last container;
        ``sorted_asks()`` follows without a sort (a new list: one handed out is never
        changed)."""
        n = self.next_container
        self.next_container = n + 1
        prio = ask.priority
        c: Container = _new(Container)  # Container(cid, app_id, ...), faster
        _c_id(c, f"{self._cid_prefix}{n:06d}")
        _c_app(c, self.app_id)
        _c_node(c, node_id)
        _c_prio(c, prio)
        _c_res(c, ask.resources)
        _c_kind(c, ask.kind)
        if prio == AM_PRIORITY:
            self.am_container = c.container_id
        else:
            self.undelivered.append(c)
        count = ask.count
        by_prio = self._sorted_asks
        if count > 1:
            self.asks[prio] = fewer = ask_with_count(ask, count - 1)
            if by_prio is not None:
                if len(by_prio) == 1:
                    by_prio = [fewer]
                else:
                    by_prio = [fewer if a is ask else a for a in by_prio]
        else:
            del self.asks[prio]
            if by_prio is not None:
                by_prio = [a for a in by_prio if a is not ask]
        self._sorted_asks = by_prio
        self.pending -= 1
        self._demand = None
        return c

    def clear_asks(self) -> None:
        self.asks.clear()
        self.pending = 0
        self._sorted_asks = self._demand = None


class ClusterState:
    """Everything the RM knows; policies see it through the read-only ClusterView protocol."""

    def __init__(self, queues: QueueSpec, users: Mapping[str, UserSpec]) -> None:
        self.now = 0.0
        self.capacity = ZERO
        self.nodes: dict[str, Node] = {}
        self.apps: dict[str, Application] = {}  # running, in submission order
        self.finished: dict[str, EndedApp] = {}  # ended, in the order they ended
        self.queues: dict[str, Queue] = build_queues(queues)
        self.root_queue = self.queues[queues.name]
        self.users: dict[str, User] = {name: User(u) for name, u in users.items()}
        #: Keeps the books (``rm.core.books``): each queue's and user's total is a ``Book``.
        self.ledger = BookLedger()
        for q in self.queues.values():
            q._used = self.ledger.book()
        for u in self.users.values():
            u._used = self.ledger.book()
        self.pending: PendingIndex[Application] = PendingIndex()
        #: Bumped on every change that may alter a policy's shares.
        self.version = 0
        #: Applications whose AM has something new to hear (containers granted or ended,
        #: its attempt or the application ended), in the order they got it; None while no
        #: host listens (``SchedulingHints.take_news`` turns it on).
        self.news: dict[str, None] | None = None
        self._largest: Resources | None = None
        self._live_nodes: int | None = None

    @property
    def used(self) -> Resources:
        return self.root_queue.used

    def pending_apps(self) -> list[Application]:
        return self.pending.sorted_apps()

    def smallest_ask(self) -> Resources | None:
        pending = self.pending
        if not pending.apps:
            return None
        m = pending.min_ask
        return m if m is not None else pending.lower_bound()

    def watch_apps(self) -> dict[str, Any]:
        return self.pending.watch()

    def watch_priorities(self) -> dict[str, set[int] | None]:
        return self.pending.watch_priorities()

    # ------------------------------------------------------------------ nodes
    def tell(self, app_id: str) -> None:
        """``app_id``'s AM has something new to hear (see ``news``)."""
        news = self.news
        if news is not None:
            news[app_id] = None

    def nodes_changed(self) -> None:
        """A node came or went: cached totals are stale."""
        self._largest = self._live_nodes = None
        self.version += 1

    @property
    def live_nodes(self) -> int:
        if self._live_nodes is None:
            self._live_nodes = sum(1 for n in self.nodes.values() if n.alive)
        return self._live_nodes

    def largest_node(self) -> Resources | None:
        """The componentwise maximum of live nodes (cached; nodes come and go rarely)."""
        if self._largest is None:
            nodes = [n.capacity for n in self.nodes.values() if n.alive]
            if not nodes:
                return None
            out = nodes[0]
            for r in nodes[1:]:
                out = out.componentwise_max(r)
            self._largest = out
        return self._largest

    # ------------------------------------------------------------------ applications
    def add_app(self, app: Application) -> None:
        if app.user not in self.users:
            user = self.users[app.user] = User(UserSpec(app.user))
            user._used = self.ledger.book()
        if not app.containers:
            app._allocated = self.ledger.book()
        # The root queue's total is the cluster's: every application is in a leaf queue.
        books = [self.users[app.user]._used]
        q: Queue | None = self.queues.get(app.queue)
        while q is not None:
            books.append(q._used)
            q = q.parent
        app.books = tuple(books)
        app._all_books = (app._allocated, *app.books)
        if self.ledger.on and not all(isinstance(b, Book) for b in app._all_books):
            self.ledger.stop()  # a book that would not bring itself up to date when read
        self.apps[app.app_id] = app
        self.version += 1

    def app(self, app_id: str) -> Application | EndedApp | None:
        """A running or ended application."""
        return self.apps.get(app_id) or self.finished.get(app_id)

    # ------------------------------------------------------------------ containers
    def place_container(self, node: Node, app: Application, ask: Ask) -> Container:
        """One container of ``app``'s ``ask`` (which fits) on ``node``: granted and held;
        the pending index hears of it, and the AM of a task's container (``news``)."""
        c = app.grant(ask, node.node_id)
        res = c.resources  # ``hold``, inlined (a call costs 0.2% of the simulator's loop)
        node._free.sub(res)
        cid = c.container_id
        node.containers[cid] = c
        app.containers[cid] = c
        ledger = self.ledger
        if ledger.on and app._book_shape is res:  # ``BookLedger.add``'s usual case
            app._book_n += 1
            ledger.pending[app] = None
        else:
            ledger.add(app, res)
        self.version += 1
        prio = c.priority
        if prio != AM_PRIORITY:
            news = self.news
            if news is not None:  # ``tell``
                news[app.app_id] = None
        self.pending.granted(app, prio)
        return c

    def hold(self, node: Node, app: Application, c: Container) -> None:
        """``c`` (which fits) runs on ``node`` for ``app``: off the node's free space, into
        the application's books (``free_container`` undoes it)."""
        res = c.resources
        node._free.sub(res)
        cid = c.container_id
        node.containers[cid] = c
        app.containers[cid] = c
        self.ledger.add(app, res)
        self.version += 1

    def free_container(self, c: Container) -> Application | None:
        """Take ``c`` off its node and out of its application's books; its application
        if that is still running."""
        cid = c.container_id
        node = self.nodes.get(c.node_id)
        if node is not None and node.containers.pop(cid, None) is not None and node.alive:
            node._free.add(c.resources)
        app = self.apps.get(c.app_id)
        if app is not None and app.containers.pop(cid, None) is not None:
            ledger = self.ledger  # allocated, and the books (``BookLedger.sub``'s usual
            if ledger.on and app._book_shape is c.resources:  # case inlined)
                app._book_n -= 1
                ledger.pending[app] = None
            else:
                ledger.sub(app, c.resources)
            self.version += 1
            self.pending.touch(app, c.priority)
        return app


@dataclass(frozen=True)
class AppRecord:
    """What the state store keeps of an application (``ResourceManager.app_records``):
    enough for a restarted RM to report it and, while it runs, to continue it. Containers
    are not kept (YARN's NMs report theirs on resync; here they are ended, see
    ``ResourceManager.restore``)."""

    app_id: str
    seq: int
    submission: AppSubmission  # with the real job (not blinded)
    state: AppState
    submit_s: float
    finish_s: float | None
    attempt: int
    am_registered: bool
    #: Every task done (as loaded), or those done since ``of``'s ``done_since`` (to write).
    done_tasks: tuple[tuple[int, int], ...]
    progress: float
    diagnostics: str
    #: Attempts that failed through no fault of the AM (YARN-614); absent from stores
    #: written before it was kept: 0.
    uncounted_attempts: int = 0

    @classmethod
    def of(cls, app: Application | EndedApp, done_since: int = 0) -> AppRecord:
        done = app.done_tasks
        return cls(
            app.app_id,
            app.seq,
            app.submission,
            app.state,
            app.submit_s,
            app.finish_s,
            app.attempt,
            app.am_registered,
            tuple(islice(done, done_since, None)) if done_since else tuple(done),
            app.progress,
            app.diagnostics,
            app.uncounted_attempts,
        )

    def to_json(self) -> dict[str, Any]:
        """Everything but the job (the store keeps it as the wire's bytes) and the done
        tasks (a table of their own: each is written once)."""
        return {
            "app_id": self.app_id,
            "seq": self.seq,
            **self.submission.to_json(),
            "state": str(self.state),
            "submit_s": self.submit_s,
            "finish_s": self.finish_s,
            "attempt": self.attempt,
            "am_registered": self.am_registered,
            "progress": self.progress,
            "diagnostics": self.diagnostics,
            "uncounted_attempts": self.uncounted_attempts,
        }

    @classmethod
    def from_json(
        cls, d: Mapping[str, Any], job: JobSpec | None, done: Iterable[tuple[int, int]]
    ) -> AppRecord:
        sub = AppSubmission.from_json(d, job)
        finish = d["finish_s"]
        return cls(
            str(d["app_id"]),
            int(d["seq"]),
            sub,
            AppState(d["state"]),
            float(d["submit_s"]),
            None if finish is None else float(finish),
            int(d["attempt"]),
            bool(d["am_registered"]),
            tuple(dict.fromkeys(done)),
            float(d["progress"]),
            str(d["diagnostics"]),
            int(d.get("uncounted_attempts", 0)),
        )
