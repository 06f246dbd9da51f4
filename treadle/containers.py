"""Clusters of containers: the RM, NM hosts and the AM host, each a Docker container.

``DockerCluster`` is ``LocalCluster``'s counterpart for ``treadle compare --mode docker``
and the e2e tests: the same roles with the same command lines (treadle.launcher builds
them), from one image, on a private bridge network of their own. The RM is reached by the
other containers as ``rm:7070`` and by this machine through a port published on loopback
only; NM host ``k`` hosts a contiguous share of the workload's nodes and is reached by the
AM host as ``nm-k:7071``. Files the processes read (the RM's queues and users, each NM
host's node list) are copied in before the containers start, so nothing is mounted.

Containers are created through testcontainers (its reaper is disabled: it is an image to
pull, and this class removes what it created itself). Every container and the network
carry the label ``treadle.cluster=<id>``; ``stop()`` stops the containers (SIGTERM, then
SIGKILL after a grace period, so the processes log how late their timers fired), keeps
their logs in the work directory and removes them and the network, on every way out of
``start()`` and ``async with``; ``remove_labelled()`` sweeps whatever a killed CLI left.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from treadle.errors import TreadleError
from treadle.launcher import (
    DEFAULT_EXPIRY_INTERVALS,
    DEFAULT_MAX_AM_ATTEMPTS,
    LOG_TAIL_LINES,
    am_host_command,
    am_poll_s,
    check_cluster_settings,
    guarded,
    nm_command,
    nodes_json,
    rm_command,
    rm_config_yaml,
    split_nodes,
    timer_summary,
    wait_for_nodes,
)
from treadle.model import Workload
from treadle.registry import GROUPS
from treadle.rpcutil import wait_ready

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

# The reaper is an image to pull (no registry here) and this module cleans up after itself.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

T = TypeVar("T")

DEFAULT_IMAGE = "treadle:latest"
LABEL = "treadle.cluster"
RM_PORT = 7070
NM_PORT = 7071
RM_CONFIG_PATH = "/tmp/rm-workload.yaml"
NODES_PATH = "/tmp/nodes.json"
AM_READY_PATH = "/tmp/am.ready"
BUILD_HINT = "build it with deploy/build-image.sh (BASE_IMAGE=treadle-base:bookworm offline)"


def docker_client() -> Any:
    """A Docker engine client; a TreadleError saying so when the engine cannot be reached."""
    import docker
    import requests

    hint = "is dockerd running and DOCKER_HOST right?"
    # docker-py leaks its socket when a unix socket refuses it: try the socket first.
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(host.removeprefix("unix://"))
            except OSError as e:
                raise TreadleError(
                    f"cannot reach the Docker engine at {host} ({e}); {hint}"
                ) from None
    try:
        client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        raise TreadleError(f"cannot reach the Docker engine ({e}); {hint}") from None
    return client


#: The image label deploy/build-image.sh sets to ``source_digest()`` of the checkout.
SOURCE_LABEL = "treadle.source"
PACKAGES = ("treadle", "rm", "am", "nm", "plugins")


def source_digest() -> str:
    """A digest of the Python sources of this installation's packages (and the plugin
    entry points): equal for a checkout and an image built from it, whatever the paths."""
    import hashlib
    import importlib
    import importlib.metadata

    h = hashlib.sha256()
    for name in PACKAGES:
        root = Path(importlib.import_module(name).__file__ or "").parent
        for path in sorted(root.rglob("*.py")):
            h.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
    for group in sorted(GROUPS.values()):
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            h.update(f"{group}:{ep.name}={ep.value}\0".encode())
    return h.hexdigest()[:16]


def check_image(image: str) -> bool:
    """Fail with a hint when ``image`` is not on this machine (nothing is pulled); return
    whether it was built from these very sources (a stale image runs other code)."""
    import docker

    client = docker_client()
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise TreadleError(f"docker image {image!r} not found; {BUILD_HINT}") from None
    finally:
        client.close()
    labels = found.labels or {}
    return bool(labels.get(SOURCE_LABEL) == source_digest())


def labelled(cluster_id: str | None = None) -> list[str]:
    """Names of the containers and networks labelled by a DockerCluster (``cluster_id``'s)."""
    client = docker_client()
    selector = f"{LABEL}={cluster_id}" if cluster_id else LABEL
    try:
        found = [c.name for c in client.containers.list(all=True, filters={"label": selector})]
        found += [n.name for n in client.networks.list(filters={"label": selector})]
    finally:
        client.close()
    return [str(name) for name in found]


def remove_labelled(cluster_id: str | None = None) -> int:
    """Remove every container and network labelled by a DockerCluster (only those of
    ``cluster_id`` if given); return how many objects were removed."""
    import docker

    client = docker_client()
    selector = f"{LABEL}={cluster_id}" if cluster_id else LABEL
    removed = 0
    try:
        for c in client.containers.list(all=True, filters={"label": selector}):
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
                removed += 1
        for n in client.networks.list(filters={"label": selector}):
            with contextlib.suppress(docker.errors.NotFound):
                n.remove()
                removed += 1
    finally:
        client.close()
    return removed


@dataclass
class DockerCluster:
    """An RM container, ``nm_containers`` NM host containers and (unmanaged AMs) an AM host
    container of ``image``, shaped by ``workload`` (nodes, heartbeat, queues, users).

    Parameters are checked on construction, so a bad policy name or parameter fails before
    any container is created. ``rm_address`` is the RM's address from this machine.
    """

    workload: Workload
    policy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    image: str = DEFAULT_IMAGE
    workdir: Path = Path(".treadle/docker")
    dilation: float = 10.0
    nm_containers: int = 2
    managed_am: bool = False
    am_interval_s: float | None = None
    expiry_intervals: int = DEFAULT_EXPIRY_INTERVALS
    max_am_attempts: int = DEFAULT_MAX_AM_ATTEMPTS
    ready_timeout_s: float = 60.0
    stop_grace_s: float = 5.0
    log_level: str = "info"
    cluster_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    rm_address: str = field(default="", init=False)
    _network: Network | None = field(default=None, init=False, repr=False)
    _containers: dict[str, DockerContainer] = field(default_factory=dict, init=False, repr=False)
    _expected_exit: set[str] = field(default_factory=set, init=False, repr=False)
    _logs: dict[str, Path] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        check_cluster_settings(
            self.workload,
            self.policy,
            self.params,
            dilation=self.dilation,
            parts=self.nm_containers,
            parts_option="--nm-containers",
            expiry_intervals=self.expiry_intervals,
            max_am_attempts=self.max_am_attempts,
            am_interval_s=self.am_interval_s,
        )
        self.workdir = Path(self.workdir)

    @property
    def heartbeat_s(self) -> float:
        return self.workload.cluster.heartbeat_s

    @property
    def containers(self) -> list[str]:
        """Names of the running containers: rm, nm-1, ..., am."""
        return list(self._containers)

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # ------------------------------------------------------------------ start
    async def __aenter__(self) -> DockerCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    async def start(self) -> str:
        """Create the network and every container and wait until the cluster is ready;
        return the RM address. On any failure what was created is removed before raising."""
        if self._containers:
            raise TreadleError("this cluster is already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(check_image, self.image)
        atexit.register(self.stop)
        try:
            await self._start()
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise
        return self.rm_address

    def _container(self, name: str, command: list[str]) -> DockerContainer:
        from testcontainers.core.container import DockerContainer

        assert self._network is not None
        c = DockerContainer(self.image).with_command(command)
        c.with_name(f"treadle-{self.cluster_id}-{name}").with_network(self._network)
        # with_kwargs replaces the extra arguments: the label goes in the same call.
        c.with_network_aliases(name).with_kwargs(hostname=name, labels={LABEL: self.cluster_id})
        return c

    def _run(self, name: str, c: DockerContainer) -> None:
        self._containers[name] = c  # before start: stop() removes a half-started one
        c.start()

    async def _start(self) -> None:
        from testcontainers.core.network import Network

        deadline = time.monotonic() + self.ready_timeout_s
        rm_target = f"rm:{RM_PORT}"
        self._network = Network(docker_network_kw={"labels": {LABEL: self.cluster_id}})
        await asyncio.to_thread(self._network.create)

        rm = self._container(
            "rm",
            rm_command(
                "python3",
                self.policy,
                self.params,
                listen=f"0.0.0.0:{RM_PORT}",
                advertise=rm_target,
                dilation=self.dilation,
                config=RM_CONFIG_PATH,
                events="/tmp/rm-events.jsonl",
                heartbeat_s=self.heartbeat_s,
                am_interval_s=self.am_interval_s or self.heartbeat_s,
                expiry_intervals=self.expiry_intervals,
                max_am_attempts=self.max_am_attempts,
                log_level=self.log_level,
            ),
        )
        rm.with_copy_into_container(rm_config_yaml(self.workload).encode(), RM_CONFIG_PATH)
        # Published on loopback only: the RM has no authentication yet.
        rm.ports[f"{RM_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
        await asyncio.to_thread(self._run, "rm", rm)
        port = await asyncio.to_thread(rm.get_exposed_port, RM_PORT)
        self.rm_address = f"127.0.0.1:{port}"
        await self._wait_rm(deadline)

        chunks = split_nodes(self.workload.cluster.nodes, self.nm_containers)
        for k, chunk in enumerate(chunks, 1):
            name = f"nm-{k}"
            nm = self._container(
                name,
                nm_command(
                    "python3",
                    rm_target,
                    NODES_PATH,
                    listen=f"0.0.0.0:{NM_PORT}",
                    advertise=f"{name}:{NM_PORT}",
                    rm_wait_s=max(1.0, self.ready_timeout_s),
                    log_level=self.log_level,
                ),
            )
            nm.with_copy_into_container(nodes_json(chunk).encode(), NODES_PATH)
            await asyncio.to_thread(self._run, name, nm)

        def timeout(seen: int) -> TreadleError:
            return self._failure(
                "nm-1",
                f"(and the other NM hosts) registered {seen}/{len(self.workload.cluster.nodes)} "
                f"nodes with the RM in {self.ready_timeout_s:g} s",
            )

        await wait_for_nodes(self.rm_address, len(self.workload.cluster.nodes), deadline,
                             self._check, timeout)  # fmt: skip

        if not self.managed_am:
            am = self._container(
                "am",
                am_host_command(
                    "python3",
                    rm_target,
                    port_file=AM_READY_PATH,
                    poll_s=am_poll_s(self.heartbeat_s, self.dilation),
                    log_level=self.log_level,
                ),
            )
            await asyncio.to_thread(self._run, "am", am)
            while not await asyncio.to_thread(self._exists, "am", AM_READY_PATH):
                await self._check()
                if time.monotonic() > deadline:
                    raise self._failure("am", f"was not ready in {self.ready_timeout_s:g} s")
                await asyncio.sleep(0.1)
        await self._check()

    async def _wait_rm(self, deadline: float) -> None:
        while True:
            await self._check()
            try:
                await wait_ready(self.rm_address, min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise self._failure("rm", "did not answer its health check") from None

    def _exists(self, name: str, path: str) -> bool:
        result = self._containers[name].get_wrapped_container().exec_run(["test", "-e", path])
        return bool(result.exit_code == 0)

    # ------------------------------------------------------------------ watching
    def _status(self, name: str) -> tuple[str, int | None]:
        import docker

        try:
            wrapped = self._containers[name].get_wrapped_container()
            wrapped.reload()
        except docker.errors.NotFound:
            return "removed", None
        state = wrapped.attrs.get("State", {})
        return str(state.get("Status", "")), state.get("ExitCode")

    def _dead(self) -> list[tuple[str, int | None]]:
        out = []
        for name in list(self._containers):
            if name in self._expected_exit:
                continue
            status, code = self._status(name)
            if status not in ("running", "created", "restarting"):
                out.append((name, code))
        return out

    async def _check(self) -> None:
        dead = await asyncio.to_thread(self._dead)
        if dead:
            name, code = dead[0]
            raise self._failure(name, f"exited (exit status {code})")

    def _failure(self, name: str, what: str) -> TreadleError:
        tail = ""
        c = self._containers.get(name)
        if c is not None:
            with contextlib.suppress(Exception):
                out, err = c.get_logs()
                lines = (out + err).decode(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                tail = "\n".join(lines)
        detail = f"; last lines of its log:\n{tail}" if tail else ""
        return TreadleError(f"docker cluster: container {name} {what}{detail}")

    async def guard(self, aw: Awaitable[T], poll_s: float = 0.5) -> T:
        """Await ``aw`` while watching the containers: if one exits, cancel ``aw`` and raise
        a TreadleError with the end of that container's log."""
        return await guarded(aw, self._check, poll_s)

    def expect_exit(self, name: str) -> None:
        """Declare that container ``name`` may stop (a test killing an NM host)."""
        self._expected_exit.add(name)

    def kill(self, name: str) -> None:
        """SIGKILL container ``name`` (an NM host failing), expected by ``guard``."""
        self.expect_exit(name)
        self._containers[name].get_wrapped_container().kill()

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every container (the AM host and NMs first, the RM last), keep their logs
        in the work directory, remove them and the network. Safe to call twice."""
        import docker

        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        containers, self._containers = self._containers, {}
        order = [n for n in reversed(containers) if n != "rm"] + (
            ["rm"] if "rm" in containers else []
        )
        for name in order:
            c = containers[name]
            wrapped = c._container  # None when creating it failed
            if wrapped is None:
                continue
            with contextlib.suppress(docker.errors.DockerException):
                wrapped.stop(timeout=max(1, round(self.stop_grace_s)))
            with contextlib.suppress(docker.errors.DockerException, OSError):
                log = self.log_path(name)
                log.write_bytes(wrapped.logs(stdout=True, stderr=True))
                self._logs[name] = log
            with contextlib.suppress(docker.errors.DockerException):
                wrapped.remove(force=True, v=True)
        network, self._network = self._network, None
        if network is not None and network._network is not None:
            with contextlib.suppress(docker.errors.DockerException):
                network.remove()
        with contextlib.suppress(Exception):
            remove_labelled(self.cluster_id)  # anything a failure left half-made

    def timer_stats(self) -> dict[str, dict[str, float]]:
        """How late each process's timers fired (emulated s), from the summaries the
        processes log when they stop; call after ``stop()``."""
        out: dict[str, dict[str, float]] = {}
        for name, log in self._logs.items():
            summary = timer_summary(log)
            if summary is not None:
                out[name] = summary
        return out
