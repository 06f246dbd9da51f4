"""The RM's books kept lazily (``rm.core.books``) read exactly as books updated at once: the
same numbers of the same types, whatever the amounts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rm.core.state import Application, ClusterState
from treadle.messages import AppSubmission
from treadle.model import QueueSpec
from treadle.resources import Accumulator, Resources


def _state(eager: bool) -> tuple[ClusterState, list[Application]]:
    st = ClusterState(QueueSpec("root", children=(QueueSpec("a"), QueueSpec("b"))), {})
    if eager:
        st.ledger.stop()
    apps = []
    for i, (user, queue) in enumerate([("u1", "a"), ("u1", "b"), ("u2", "b")]):
        app = Application(f"app{i}", i, AppSubmission(f"j{i}", user, queue), 0.0)
        st.add_app(app)
        apps.append(app)
    return st, apps


def _books(st: ClusterState, apps: list[Application]) -> list[Any]:
    out = [dict(a.allocated) for a in apps]
    out += [dict(u.used) for u in st.users.values()]
    out += [dict(q.used) for q in st.queues.values()]
    return [(k, v, type(v)) for d in out for k, v in sorted(d.items())]


@pytest.mark.parametrize(
    "shapes",
    [
        [Resources(vcores=1, memory_mb=2048)],
        [Resources(vcores=1.0, memory_mb=2048.0), Resources(vcores=2.0, memory_mb=1024.0)],
        [Resources(vcores=1, memory_mb=2048), Resources(vcores=1.0, memory_mb=512.0)],
        [Resources(vcores=0.5, memory_mb=1000), Resources(vcores=1, gpu=1)],
    ],
    ids=["ints", "whole floats", "ints then floats", "fractions"],
)
def test_lazy_books_read_as_books_kept_at_once(shapes: list[Resources]) -> None:
    lazy, lazy_apps = _state(eager=False)
    eager, eager_apps = _state(eager=True)
    rng = random.Random(7)
    held: list[tuple[int, Resources]] = []
    for step in range(400):
        if held and rng.random() < 0.45:
            i, r = held.pop(rng.randrange(len(held)))
            lazy.ledger.sub(lazy_apps[i], r)
            eager.ledger.sub(eager_apps[i], r)
        else:
            i, r = rng.randrange(3), rng.choice(shapes)
            held.append((i, r))
            lazy.ledger.add(lazy_apps[i], r)
            eager.ledger.add(eager_apps[i], r)
        if step in (150, 300):  # reads now and then bring the books up to date
            assert _books(lazy, lazy_apps) == _books(eager, eager_apps)
    for i, r in held:  # every container ended: totals back to (int) zero
        lazy.ledger.sub(lazy_apps[i], r)
        eager.ledger.sub(eager_apps[i], r)
    assert _books(lazy, lazy_apps) == _books(eager, eager_apps)
    assert lazy.used == eager.used == Resources()
    # Deferred throughout while every amount is a whole number of one type.
    assert lazy.ledger.on == (
        len({type(v) for r in shapes for v in r.values()}) == 1
        and all(float(v).is_integer() for r in shapes for v in r.values())
    )


def test_books_read_after_nearly_every_change_are_kept_at_once() -> None:
    st, apps = _state(eager=False)
    r = Resources(vcores=1, memory_mb=2048)
    st.ledger.add(apps[0], r)
    assert st.users["u1"].used == r
    assert not st.ledger.on
    st.ledger.add(apps[1], r)
    assert st.queues["root"].used == r + r


def test_an_ended_application_is_forgotten_with_its_books_up_to_date() -> None:
    """``forget``: the ledger keeps neither the ended application nor its own book, and
    every book reads as if kept at once (the RM would otherwise hold every ended
    application, with its job, to the end of the run)."""
    lazy, lazy_apps = _state(eager=False)
    eager, eager_apps = _state(eager=True)
    r = Resources(vcores=1, memory_mb=2048)
    for st, apps in ((lazy, lazy_apps), (eager, eager_apps)):
        for k in range(20):  # applications that end
            app = Application(f"x{k}", 9 + k, AppSubmission("x", "u1", "a"), 0.0)
            st.add_app(app)
            st.ledger.add(app, r)
            st.ledger.sub(app, r)
            st.ledger.forget(app)
            apps.append(app)
        for _ in range(3):
            st.ledger.add(apps[0], r)
            st.ledger.add(apps[1], r)
        st.ledger.sub(apps[0], r)
        st.ledger.forget(apps[0])
    assert list(lazy.ledger.pending) == [lazy_apps[1]]
    # The ended ones' books are plain accumulators; the ledger's list is dropped of
    # them whenever they are half of it.
    assert all(type(a._allocated) is Accumulator for a in [lazy_apps[0], *lazy_apps[3:]])
    live = 3 + 2 + 2  # queues, users, running applications
    assert len(lazy.ledger._books) <= 2 * live
    assert _books(lazy, lazy_apps) == _books(eager, eager_apps)
