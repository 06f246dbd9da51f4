"""YARN's ids, written and read as Hadoop does: the one place treadle builds or parses them.

The formats follow Hadoop's ``toString`` and ``fromString`` of the records in
``org.apache.hadoop.yarn.api.records`` (ApplicationId, ApplicationAttemptId, ContainerId,
NodeId), number widths included:

- ``application_<clusterTimestamp>_<id>``: the id zero-padded to at least 4 digits, wider
  when it needs more (``application_1700000000000_0042``, ``..._12345``);
- ``appattempt_<clusterTimestamp>_<id>_<attempt>``: the attempt to at least 6 digits;
- ``container_[e<epoch>_]<clusterTimestamp>_<id>_<attempt>_<n>``: the attempt (and the
  epoch) to at least 2 digits, the container's number to at least 6. The ``e<epoch>_``
  part is written only when the epoch (how many times the RM restarted) is above 0, as
  Hadoop does (``container_e01_1700000000000_0042_01_000003``);
- a node ``<host>:<port>``.

The cluster timestamp is the RM's start time in milliseconds (YARN's
``ResourceManager.clusterTimeStamp``); a live RM takes it from the wall clock when it
starts and hands it to the core. The simulator uses ``SIM_CLUSTER_TIMESTAMP``, fixed, so
that its outputs stay the same from run to run. An application's number is its
submission sequence plus one (the first application is ``_0001``).

Nodes keep the names a workload or an NM gives them inside treadle (event logs, the
core). Where YARN shows a NodeId (the REST API's nodes and the node fields of its
applications, attempts and containers) a name that is not ``host:port`` already is shown
as ``<name>:NODE_PORT``: the name is the emulated host, ``NODE_PORT`` the one port every
emulated NodeManager listens on (several of them may share one process).

Ids sort by their numbers (``app_sort_key``, ``container_sort_key``, as Hadoop's
``compareTo``), never as strings: with the 4-digit minimum, ``application_T_10000``
sorts before ``application_T_9999`` as a string.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

#: The simulator's cluster timestamp (ms since the Unix epoch: 2001-09-09T01:46:40Z).
SIM_CLUSTER_TIMESTAMP = 1_000_000_000_000
#: The port of every emulated NodeManager's NodeId (a common yarn.nodemanager.address).
NODE_PORT = 8041

APP_PREFIX = "application_"
ATTEMPT_PREFIX = "appattempt_"
CONTAINER_PREFIX = "container_"

#: What Hadoop's ``fromString`` accepts, ASCII digits only (no sign, no spaces).
APP_ID_RE = re.compile(r"application_(\d+)_(\d+)", re.ASCII)
ATTEMPT_ID_RE = re.compile(r"appattempt_(\d+)_(\d+)_(\d+)", re.ASCII)
CONTAINER_ID_RE = re.compile(r"container_(?:e(\d+)_)?(\d+)_(\d+)_(\d+)_(\d+)", re.ASCII)
NODE_ID_RE = re.compile(r"(.+):(\d+)", re.ASCII)
#: What ``toString`` writes: the minimum widths of each number.
APP_ID_SHAPE = re.compile(r"application_\d+_\d{4,}", re.ASCII)
ATTEMPT_ID_SHAPE = re.compile(r"appattempt_\d+_\d{4,}_\d{6,}", re.ASCII)
CONTAINER_ID_SHAPE = re.compile(r"container_(?:e\d{2,}_)?\d+_\d{4,}_\d{2,}_\d{6,}", re.ASCII)
NODE_ID_SHAPE = re.compile(r"[^:\s]+:\d+", re.ASCII)


class AppId(NamedTuple):
    cluster_ts: int
    n: int  # the number in the id: the submission sequence plus one

    def __str__(self) -> str:
        return format_app_id(self.cluster_ts, self.n)


class AttemptId(NamedTuple):
    app: AppId
    attempt: int

    def __str__(self) -> str:
        return format_attempt_id(self.app, self.attempt)


class ContainerId(NamedTuple):
    attempt: AttemptId
    n: int
    epoch: int = 0

    @property
    def app(self) -> AppId:
        return self.attempt.app

    def __str__(self) -> str:
        return container_prefix(self.attempt.app, self.attempt.attempt, self.epoch) + (
            f"{self.n:06d}"
        )


# ---------------------------------------------------------------------- applications
def format_app_id(cluster_ts: int, n: int) -> str:
    """ApplicationId.toString: ``application_<cluster_ts>_<n>``, ``n`` at least 4 digits."""
    return f"{APP_PREFIX}{cluster_ts}_{n:04d}"


def parse_app_id(text: str) -> AppId:
    """ApplicationId.fromString; ValueError (saying what) for anything else."""
    m = APP_ID_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid ApplicationId {text!r} (application_<timestamp>_<number>)")
    return AppId(int(m.group(1)), int(m.group(2)))


def app_or_none(text: object) -> AppId | None:
    try:
        return parse_app_id(text) if isinstance(text, str) else None
    except ValueError:
        return None


def app_sort_key(app_id: str) -> tuple[int, int, str]:
    """ApplicationId.compareTo's order (timestamp, then number); a string that is no
    application id sorts first, by itself."""
    a = app_or_none(app_id)
    return (-1, -1, app_id) if a is None else (a.cluster_ts, a.n, "")


# ---------------------------------------------------------------------- attempts
def format_attempt_id(app: AppId | str, attempt: int) -> str:
    """ApplicationAttemptId.toString: ``appattempt_<cluster_ts>_<n>_<attempt>``, the
    attempt at least 6 digits; ``app`` an AppId or an application id. An id of another
    shape (an application a state store kept from before treadle wrote YARN's ids) keeps
    its text after ``application_``."""
    a = app_or_none(app) if isinstance(app, str) else app
    if a is None:
        return f"{ATTEMPT_PREFIX}{str(app).removeprefix(APP_PREFIX)}_{attempt:06d}"
    return f"{ATTEMPT_PREFIX}{a.cluster_ts}_{a.n:04d}_{attempt:06d}"


def parse_attempt_id(text: str) -> AttemptId:
    """ApplicationAttemptId.fromString; ValueError for anything else."""
    m = ATTEMPT_ID_RE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"invalid ApplicationAttemptId {text!r} (appattempt_<timestamp>_<number>_<attempt>)"
        )
    return AttemptId(AppId(int(m.group(1)), int(m.group(2))), int(m.group(3)))


# ---------------------------------------------------------------------- containers
def container_prefix(app: AppId | str, attempt: int, epoch: int = 0) -> str:
    """ContainerId.toString up to the container's number (the hot path appends
    ``f"{n:06d}"``): ``container_[e<epoch>_]<cluster_ts>_<n>_<attempt>_``."""
    a = parse_app_id(app) if isinstance(app, str) else app
    head = f"{CONTAINER_PREFIX}e{epoch:02d}_" if epoch > 0 else CONTAINER_PREFIX
    return f"{head}{a.cluster_ts}_{a.n:04d}_{attempt:02d}_"


def format_container_id(app: AppId | str, attempt: int, n: int, epoch: int = 0) -> str:
    """ContainerId.toString (module docstring)."""
    return f"{container_prefix(app, attempt, epoch)}{n:06d}"


def parse_container_id(text: str) -> ContainerId:
    """ContainerId.fromString (with or without ``e<epoch>_``); ValueError otherwise."""
    m = CONTAINER_ID_RE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"invalid ContainerId {text!r} "
            "(container_[e<epoch>_]<timestamp>_<number>_<attempt>_<container>)"
        )
    epoch, ts, n, attempt, cn = m.groups()
    return ContainerId(AttemptId(AppId(int(ts), int(n)), int(attempt)), int(cn), int(epoch or 0))


@functools.lru_cache(maxsize=1 << 16)  # policies sort the same containers tick after tick
def container_sort_key(container_id: str) -> tuple[int, int, int, int, int, str]:
    """ContainerId.compareTo's order: application, attempt, then epoch and number; a
    string that is no container id sorts first, by itself."""
    p = container_id.split("_")
    epoch = "0"
    if len(p) == 6 and p[1][:1] == "e":
        epoch = p.pop(1)[1:]
    if (
        len(p) == 5
        and p[0] == "container"
        and all(x.isascii() and x.isdigit() for x in (epoch, *p[1:]))
    ):
        return (int(p[1]), int(p[2]), int(p[3]), int(epoch), int(p[4]), "")
    return (-1, -1, -1, -1, -1, container_id)


# ---------------------------------------------------------------------- nodes
def format_node_id(name: str) -> str:
    """A node as YARN's NodeId shows it: ``host:port`` as it is, any other name as
    ``<name>:NODE_PORT``; no name, no NodeId (``""``)."""
    if not name or NODE_ID_RE.fullmatch(name):
        return name
    return f"{name}:{NODE_PORT}"


def parse_node_id(text: str) -> tuple[str, int]:
    """NodeId's host and port; ValueError for a string that is not ``host:port``."""
    m = NODE_ID_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid NodeId {text!r} (host:port)")
    return m.group(1), int(m.group(2))
