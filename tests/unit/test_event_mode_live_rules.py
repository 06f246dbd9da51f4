"""The rules of event mode on a live cluster, one role at a time (the whole of it runs in
``tests/integration/test_event_mode_live.py``): the RM places at an Allocate, before it
answers, only when asked to; an AM calls again at once on news, near a container's
expected end, and while its tasks wait, never past its periodic call."""

from __future__ import annotations

from typing import Any

import pytest
from test_cores import SMALL, make_rm, submit

from am.core import ApplicationMaster
from am.server.service import (
    EVENT_END_GRACE_WALL_S,
    EVENT_WAIT_WALL_S,
    MAX_EVENT_CALLS_IN_A_ROW,
    _Session,
)
from plugins.asks.greedy import GreedyAsks
from treadle.live.clock import EmulatedClock
from treadle.messages import AllocateRequest, Ask
from treadle.model import JobSpec, StageSpec


@pytest.mark.parametrize("place", [False, True])
def test_the_rm_places_at_an_allocate_only_in_event_mode(place: bool) -> None:
    rm = make_rm()
    app = submit(rm)
    resp = rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 0.5, place=place)
    # Heartbeat mode waits for the node's heartbeat; event mode answers with the grants.
    assert len(resp.allocated) == (2 if place else 0)


class Frozen(EmulatedClock):
    """A clock that stands still at ``t`` (emulated), at dilation 10."""

    def __init__(self, t: float) -> None:
        super().__init__(0.0, 10.0)
        self.t = t

    def now(self) -> float:
        return self.t


def session() -> Any:
    s: Any = object.__new__(_Session)
    s.ends, s._sent_asks, s._at_once = {}, [], 0
    return s


def core(tasks_waiting: bool) -> ApplicationMaster:
    job = JobSpec("j", "u", 0.0, (StageSpec("s", SMALL, (1.0, 1.0)),))
    am = ApplicationMaster(job, "app", GreedyAsks())
    if not tasks_waiting:
        am.completed_tasks = lambda: [(0, 0), (0, 1)]  # type: ignore[method-assign]
        am.runnable_stages = list  # type: ignore[method-assign,assignment]
    return am


def test_an_am_calls_at_once_on_news_and_on_changed_asks_within_a_guard() -> None:
    s, clock, am = session(), Frozen(5.0), core(False)
    asks = [Ask(0, SMALL, 1)]
    assert s.next_call(am, AllocateRequest("app", asks), False, 6.0, clock) == 5.0  # new asks
    assert s.next_call(am, AllocateRequest("app", asks), False, 6.0, clock) is None  # same
    calls = [s.next_call(am, AllocateRequest("app", asks), True, 6.0, clock) for _ in range(30)]
    # News every time: at once, up to the guard; then the periodic call, then at once again.
    assert calls[:MAX_EVENT_CALLS_IN_A_ROW] == [5.0] * MAX_EVENT_CALLS_IN_A_ROW
    assert calls[MAX_EVENT_CALLS_IN_A_ROW : MAX_EVENT_CALLS_IN_A_ROW + 2] == [None, 5.0]


def test_an_am_calls_a_grace_after_an_expected_end_and_while_tasks_wait() -> None:
    s, clock = session(), Frozen(5.0)
    quiet = AllocateRequest("app")
    s.ends = {"c1": 5.5, "c2": 7.0}
    grace = EVENT_END_GRACE_WALL_S * 10
    assert s.next_call(core(False), quiet, False, 6.0, clock) == pytest.approx(5.5 + grace)
    s.ends = {"c1": 4.0}  # overdue: again a grace from now, until the RM reports it
    assert s.next_call(core(False), quiet, False, 6.0, clock) == pytest.approx(5.0 + grace)
    s.ends = {}
    wait = EVENT_WAIT_WALL_S * 10
    assert s.next_call(core(True), quiet, False, 6.0, clock) == pytest.approx(5.0 + wait)
    assert s.next_call(core(False), quiet, False, 6.0, clock) is None
    s.ends = {"c1": 9.0}  # after the periodic call: that one comes first
    assert s.next_call(core(False), quiet, False, 6.0, clock) is None
