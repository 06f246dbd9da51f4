"""``treadle_cluster``'s objects: ``ClusterFactory`` starts live local clusters for one
test and stops every process it started at the end; ``LiveCluster`` is one of them, as a
test sees it.

A cluster is treadle's ``LocalCluster`` (an RM, NM hosts and an AM host as OS processes,
each leading a process group of its own) on ports 0, with the RM's HTTP port on, its
files in a directory of the test's own, so tests in parallel (``pytest -n``) share
nothing. Secure clusters (the default) make fresh secrets and sign every call;
``secure=False`` starts the RM with ``--insecure`` (YARN's "simple" mode: every call
accepted unauthenticated), which ``LocalCluster`` has no option for yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treadle import events as ev
from treadle.cluster.driver import replay
from treadle.cluster.local import LocalCluster
from treadle.cluster.procs import ProcessInfo, signal_group
from treadle.cluster.secrets import add_user
from treadle.live.auth import Credentials, read_secret
from treadle.model import NodeSpec, Workload
from treadle.study.runner import PolicyChoice, RunOptions, asks_for
from treadle.testing.results import Results
from treadle.testing.sim import WorkloadArg, as_workload


def with_nodes(workload: Workload, nodes: int | Sequence[NodeSpec] | None) -> Workload:
    """``workload`` on other nodes: None keeps its own, N is N nodes of its first node's
    resources (node1..nodeN), a sequence is those nodes."""
    if nodes is None:
        return workload
    if isinstance(nodes, int):
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {nodes}")
        first = workload.cluster.nodes[0]
        specs = tuple(
            NodeSpec(f"node{i}", first.resources, first.rack) for i in range(1, 1 + nodes)
        )
    else:
        specs = tuple(nodes)
    return dataclasses.replace(workload, cluster=dataclasses.replace(workload.cluster, nodes=specs))


class Submission:
    """A workload's replay on a cluster, running in a thread of its own; ``wait()``
    returns its ``Results`` (or raises what the replay raised)."""

    def __init__(self, cluster: LiveCluster, workload: Workload, timeout_s: float) -> None:
        self.workload = workload
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._records: list[ev.Record] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="treadle-replay", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._cluster
        strategy, params = asks_for(PolicyChoice(c.policy, dict(c.params)), RunOptions())
        run = replay(
            c.rm_address,
            self.workload,
            ask_strategy=strategy,
            ask_params=params,
            timeout_s=self._timeout_s,
            mode="local",
            rm_log=c.workdir / "rm.log",
        )
        try:
            self._records = asyncio.run(run)
        except BaseException as e:
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> Results:
        """The replay's results once every job ended (at most the submission's timeout
        plus a margin, or ``timeout_s`` wall seconds)."""
        self._thread.join(self._timeout_s + 30.0 if timeout_s is None else timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the replay of {self.workload.name!r} did not end in time")
        if self._error is not None:
            raise self._error
        assert self._records is not None
        return Results.of(self._records, self.workload, self._cluster.policy)


@dataclass
class LiveCluster:
    """A started local cluster as a test sees it. ``credentials`` is the cluster's admin
    (``treadle``) for a secure cluster, None for ``secure=False``; REST calls to
    ``rest_url`` are signed with them by ``rm.server.http_auth.SignedAuth``."""

    cluster: LocalCluster
    workload: Workload
    secure: bool
    submissions: list[Submission] = field(default_factory=list)

    @property
    def rm_address(self) -> str:
        return self.cluster.rm_address

    @property
    def rest_url(self) -> str:
        return self.cluster.http_url

    @property
    def policy(self) -> str:
        return self.cluster.policy

    @property
    def params(self) -> Mapping[str, Any]:
        return self.cluster.params

    @property
    def workdir(self) -> Path:
        return self.cluster.workdir

    @property
    def secrets_dir(self) -> Path:
        return self.workdir / "secrets"

    @property
    def credentials(self) -> Credentials | None:
        return self.cluster.secrets.driver if self.secure else None

    @property
    def processes(self) -> dict[str, ProcessInfo]:
        """Each role's process (pid, start time, log) by name: "rm", "nm-1", "am"."""
        return self.cluster.processes

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items()}

    def add_user(self, user: str, role: str = "user") -> Credentials:
        """A new user of a secure cluster's ACL (``treadle cluster add-user``)."""
        if not self.secure:
            raise ValueError("an insecure cluster has no ACL: every caller is accepted")
        key = add_user(self.secrets_dir, user, role)
        return Credentials(user, read_secret(key.path, f"key of {user!r}"))

    def submit(
        self, workload: WorkloadArg | None = None, *, timeout_s: float = 120.0
    ) -> Submission:
        """Replay ``workload``'s jobs (default: the cluster's own workload) on this cluster,
        in the background; a workload's nodes must be the cluster's."""
        wl = self.workload if workload is None else as_workload(workload)
        sub = Submission(self, wl, timeout_s)
        self.submissions.append(sub)
        return sub

    def run(self, workload: WorkloadArg | None = None, *, timeout_s: float = 120.0) -> Results:
        """``submit`` and ``wait``: the replay's results."""
        return self.submit(workload, timeout_s=timeout_s).wait()


class ClusterFactory:
    """Starts ``LiveCluster``s under ``root`` (one directory each) and, on ``close()``,
    stops them all: each cluster's own stop (SIGTERM, then SIGKILL of the groups), then
    SIGKILL of the process group of every pid this factory saw started."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clusters: list[LiveCluster] = []
        self.started_pids: set[int] = set()

    def __call__(
        self,
        workload: WorkloadArg,
        policy: str = "fifo",
        params: Mapping[str, Any] | None = None,
        *,
        nodes: int | Sequence[NodeSpec] | None = None,
        dilation: float = 10.0,
        secure: bool = True,
        nm_processes: int = 1,
        ready_timeout_s: float = 60.0,
    ) -> LiveCluster:
        wl = with_nodes(as_workload(workload), nodes)
        workdir = self.root / f"cluster-{len(self.clusters) + 1}"
        cluster = LocalCluster(
            wl, policy, dict(params or {}), workdir=workdir, dilation=dilation,
            nm_processes=nm_processes, http_port=0, ready_timeout_s=ready_timeout_s,
            insecure=not secure,
        )  # fmt: skip
        live = LiveCluster(cluster, wl, secure)
        self.clusters.append(live)
        try:
            asyncio.run(cluster.start())
        finally:
            self._note_pids()
        return live

    def _note_pids(self) -> None:
        for c in self.clusters:
            self.started_pids.update(c.pids.values())

    def close(self) -> None:
        """Stop everything started; safe to call twice."""
        self._note_pids()  # restarted roles have new pids
        for c in self.clusters:
            with contextlib.suppress(Exception):
                c.cluster.stop()
        for pid in sorted(self.started_pids):
            signal_group(pid, signal.SIGKILL)
