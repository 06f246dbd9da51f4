"""What a restarted RM reads in its previous run's event log (``--events``): its records
(a last line cut short is cut off), the containers it left open and those it saw end,
and the mark of application ids past every submission it logged."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path

import structlog

from treadle import events as ev
from treadle.errors import TreadleError
from treadle.messages import ContainerState, ContainerStatus
from treadle.yarnids import app_or_none

log = structlog.get_logger("rm")


def open_containers(records: Iterable[ev.Record]) -> dict[str, tuple[str, str, bool]]:
    """The containers an event log leaves open (allocated or started, never ended):
    container id -> (application, node, started)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for r in records:
        e, cid = r.get("event"), r.get("container")
        if cid is None:
            continue
        if e == ev.CONTAINER_ALLOCATED:
            out[cid] = (str(r.get("job", "")), str(r.get("node", "")), False)
        elif e == ev.CONTAINER_STARTED:
            out[cid] = (str(r.get("job", "")), str(r.get("node", "")), True)
        elif e in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED):
            out.pop(cid, None)
    return out


def ended_containers(records: Iterable[ev.Record]) -> list[tuple[str, ContainerStatus]]:
    """(application, status) of every container an event log saw end on its node: a
    restarted RM hands them to the running applications' AMs again, since the previous RM
    may have died before an AM heard of them (an AM ignores containers it does not hold)."""
    out = []
    for r in records:
        if r.get("event") != ev.CONTAINER_FINISHED:
            continue
        with contextlib.suppress(KeyError, TypeError, ValueError):
            t = float(r["t"])
            state = ContainerState(str(r["state"]))
            status = ContainerStatus(str(r["container"]), state, int(r["exit_status"]), t, t)
            out.append((str(r["job"]), status))
    return out


def read_events(path: str | Path) -> list[ev.Record]:
    """The records of an RM's event file. A last line cut short (a kill in mid-write) is
    reported and cut off the file, so that the continued stream starts on a line of its
    own; a line in the middle that is not a record is refused, naming it."""
    out: list[ev.Record] = []
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return out
    except OSError as e:
        raise TreadleError(f"--events {path}: cannot read the previous run's events: {e}") from None
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        log.warning("event_log_tail_cut", file=str(path), bytes_cut=len(data) - whole,
                    records=data.count(b"\n"))  # fmt: skip
        with open(path, "r+b") as f:
            f.truncate(whole)
    for n, line in enumerate(data[:whole].splitlines(), 1):
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            raise TreadleError(
                f"{path}: line {n} of the event log is not a record (damaged); refused "
                "(--fresh-state starts a new run)"
            )
        out.append(rec)
    return out


def logged_next_seq(records: Iterable[ev.Record]) -> int:
    """The mark of ids past every application an event log saw submitted: a kill of the
    RM between its log's submission and the store's commit leaves an id the store lacks,
    which is never handed out again (``StoredState.next_seq``)."""
    out = 0
    for r in records:
        if r.get("event") == ev.JOB_SUBMITTED:
            app = app_or_none(r.get("job"))
            if app is not None:
                out = max(out, app.n)  # the id's number is its seq + 1
    return out
