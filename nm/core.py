"""The NodeManager core: runs containers for their emulated durations and reports them.

Sans-IO: ``now`` is always an argument. A container "runs" from ``start_container`` until
``start + duration``; the next heartbeat at or after that time reports it complete, as a
real NM reports a finished process on its next heartbeat.

A container is ``RUNNING`` from its start until it ends (its duration elapsed: ``COMPLETE``;
stopped: ``KILLED``; an AM process that exited non-zero: ``FAILED``). Heartbeats carry
each start (``RUNNING``, with its start time) and each end (the final state, with both
times), sent again until the RM acknowledges them. A ``RUNNING`` status has ``finish_s``
0 and ``exit_status`` 0 (meaningless until the container ends).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import NamedTuple

from treadle.errors import ConflictError, InvalidRequestError
from treadle.frozen import slot_setters
from treadle.messages import (
    EXIT_ABORTED,
    EXIT_KILLED_BY_AM,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
    NodeHeartbeat,
    NodeRegistration,
)
from treadle.resources import Accumulator, Resources

_COMPLETE = ContainerState.COMPLETE
_INF = float("inf")
_RUNNING = ContainerState.RUNNING

# Fast constructors (see treadle.frozen): one status per container start and end, one
# heartbeat message per heartbeat.
_new = object.__new__
_tuple_new = tuple.__new__
_s_id, _s_state, _s_exit, _s_start, _s_finish = slot_setters(
    ContainerStatus, ("container_id", "state", "exit_status", "start_s", "finish_s")
)
_h_node, _h_seq, _h_started, _h_completed, _h_running = slot_setters(
    NodeHeartbeat, ("node_id", "seq", "started", "completed", "running")
)


def _status(
    cid: str, state: ContainerState, exit_status: int, start: float, finish: float
) -> ContainerStatus:
    """``ContainerStatus(cid, state, exit_status, start, finish)``, faster."""
    s: ContainerStatus = _new(ContainerStatus)
    _s_id(s, cid)
    _s_state(s, state)
    _s_exit(s, exit_status)
    _s_start(s, start)
    _s_finish(s, finish)
    return s


class RunningContainer(NamedTuple):
    launch: ContainerLaunch
    start_s: float
    finish_s: float


class NodeManager:
    __slots__ = (
        "_completed",
        "_finish_heap",
        "_free",
        "_inflight",
        "_started",
        "capacity",
        "node_id",
        "rack",
        "running",
        "seq",
    )

    def __init__(self, node_id: str, capacity: Resources, rack: str = "default-rack") -> None:
        self.node_id = node_id
        self.capacity = capacity
        self.rack = rack
        self.running: dict[str, RunningContainer] = {}
        self._free = Accumulator(capacity)
        self.seq = 0
        self._started: list[ContainerStatus] = []
        self._completed: list[ContainerStatus] = []
        self._finish_heap: list[tuple[float, str]] = []
        #: The last heartbeat's (seq, started, completed) until the RM acknowledges it.
        self._inflight: tuple[int, list[ContainerStatus], list[ContainerStatus]] | None = None

    @property
    def used(self) -> Resources:
        return self.capacity - self._free.value

    def registration(self, address: str = "") -> NodeRegistration:
        return NodeRegistration(self.node_id, self.capacity, self.rack, address)

    @property
    def next_finish_s(self) -> float:
        """When the earliest running container ends (infinity when idle)."""
        heap = self._finish_heap
        if not heap:
            return _INF
        running = self.running
        while heap[0][1] not in running:
            heappop(heap)  # stopped early
            if not heap:
                return _INF
        return heap[0][0]

    def start_container(self, launch: ContainerLaunch, now: float) -> None:
        cid = launch.container_id
        duration = launch.duration_s
        res = launch.resources
        running = self.running
        if cid in running:
            raise ConflictError(f"container {cid!r} is already running")
        if duration < 0 or duration != duration:
            raise InvalidRequestError(f"container duration must be >= 0, got {duration}")
        free = self._free
        if not free.covers(res):
            raise InvalidRequestError(
                f"container {cid!r} needs {res}, node {self.node_id!r} has {free.value} free"
            )
        finish = now + duration
        running[cid] = _tuple_new(RunningContainer, (launch, now, finish))
        free.sub(res)
        heappush(self._finish_heap, (finish, cid))
        s: ContainerStatus = _new(ContainerStatus)  # _status(cid, RUNNING, ...), inlined
        _s_id(s, cid)
        _s_state(s, _RUNNING)
        _s_exit(s, EXIT_SUCCESS)
        _s_start(s, now)
        _s_finish(s, 0.0)
        self._started.append(s)

    def stop_container(self, container_id: str, now: float, *, by_am: bool = False) -> bool:
        """Kill a running container (RM or AM request); False if it is not running here."""
        rc = self.running.pop(container_id, None)
        if rc is None:
            return False
        self._free.add(rc.launch.resources)
        exit_status = EXIT_KILLED_BY_AM if by_am else EXIT_ABORTED
        self._completed.append(
            ContainerStatus(container_id, ContainerState.KILLED, exit_status, rc.start_s, now)
        )
        return True

    def finish_container(self, container_id: str, now: float, exit_status: int) -> bool:
        """A container whose process ended by itself (an AM container) is done."""
        rc = self.running.pop(container_id, None)
        if rc is None:
            return False
        self._free.add(rc.launch.resources)
        state = ContainerState.COMPLETE if exit_status == 0 else ContainerState.FAILED
        self._completed.append(ContainerStatus(container_id, state, exit_status, rc.start_s, now))
        return True

    def container_status(self, container_id: str, now: float) -> ContainerStatus | None:
        """The status of a container at ``now``: ``RUNNING`` while it runs, its final status
        once it ended, until the RM has acknowledged that end (the NM then forgets it, and
        the RM has it); None when this NM does not know the container."""
        self._collect_finished(now)
        rc = self.running.get(container_id)
        if rc is not None:
            return _status(container_id, _RUNNING, EXIT_SUCCESS, rc.start_s, 0.0)
        unacknowledged = self._inflight[2] if self._inflight is not None else []
        for s in (*unacknowledged, *self._completed):
            if s.container_id == container_id:
                return s
        return None

    def _collect_finished(self, now: float) -> None:
        heap = self._finish_heap
        running = self.running
        add = self._free.add
        completed = self._completed
        while heap and heap[0][0] <= now:
            finish, cid = heappop(heap)
            rc = running.pop(cid, None)
            if rc is None:
                continue
            add(rc[0].resources)  # rc.launch
            s: ContainerStatus = _new(ContainerStatus)  # _status(cid, COMPLETE, ...), inlined
            _s_id(s, cid)
            _s_state(s, _COMPLETE)
            _s_exit(s, EXIT_SUCCESS)
            _s_start(s, rc[1])  # rc.start_s
            _s_finish(s, finish)
            completed.append(s)

    def heartbeat(self, now: float) -> NodeHeartbeat:
        """The next heartbeat. Reports stay queued until ``acknowledge(seq)``: a heartbeat
        lost on the way is sent again in the next one (the RM ignores repeats)."""
        heap = self._finish_heap
        if heap and heap[0][0] <= now:
            self._collect_finished(now)
        self.seq = seq = self.seq + 1
        # The queued reports go out as they are (fresh lists take their place); those of
        # an unacknowledged heartbeat go out again, first.
        started = self._started
        completed = self._completed
        if started:
            self._started = []
        if completed:
            self._completed = []
        inflight = self._inflight
        if inflight is not None:
            if inflight[1]:
                started = inflight[1] + started
            if inflight[2]:
                completed = inflight[2] + completed
        self._inflight = (seq, started, completed)
        return self._message(seq, started, completed)

    def _message(
        self, seq: int, started: list[ContainerStatus], completed: list[ContainerStatus]
    ) -> NodeHeartbeat:
        hb: NodeHeartbeat = _new(NodeHeartbeat)  # NodeHeartbeat(...), faster
        _h_node(hb, self.node_id)
        _h_seq(hb, seq)
        # An empty report is a fresh list too: the message must not share a queue.
        _h_started(hb, started if started else [])
        _h_completed(hb, completed if completed else [])
        _h_running(hb, ())
        return hb

    def beat(self, now: float) -> NodeHeartbeat:
        """``heartbeat(now)`` already acknowledged: for a host that hands it to the RM in
        the same call (the simulator), so it cannot be lost on the way."""
        hb = self.heartbeat(now)
        self._inflight = None
        return hb

    def reset(self) -> list[str]:
        """The RM no longer knows this node (it was LOST, or the RM restarted): drop every
        container and report, as a YARN NM does on RESYNC; returns the containers killed."""
        killed = list(self.running)
        self.running.clear()
        self._finish_heap.clear()
        self._started.clear()
        self._completed.clear()
        self._inflight = None
        self._free = Accumulator(self.capacity)
        return killed

    def acknowledge(self, seq: int) -> None:
        """The RM answered heartbeat ``seq``: drop what it carried."""
        inflight = self._inflight
        if inflight is not None and inflight[0] == seq:
            self._inflight = None
