"""Clusters of containers: the RM, NM hosts and the AM host, each a Docker container.

``DockerCluster`` is ``LocalCluster``'s counterpart for ``treadle compare --mode docker``
and the e2e tests: the same roles with the same command lines, from one image, on a
private bridge network of their own. The RM is reached by the other containers as
``rm:7070`` and by this machine through a port published on loopback only; NM host ``k``
hosts a contiguous share of the workload's nodes and is reached by the AM host as
``nm-k:7071``. Files the processes read (the RM's configuration, each NM host's node
list) are copied in before the containers start, so nothing is mounted.

Containers are created through testcontainers (its reaper is disabled: it is an image to
pull, and this class removes what it created itself). Every container and the network
carry the label ``treadle.cluster=<id>``; ``stop()`` stops the containers (SIGTERM, then
SIGKILL after a grace period, so the processes log how late their timers fired), keeps
their logs in the work directory and removes them and the network, on every way out of
``start()`` and ``async with``; ``remove_labelled()`` sweeps whatever a killed CLI left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from treadle.cluster.base import ClusterBase
from treadle.cluster.commands import nodes_json
from treadle.cluster.procs import LOG_TAIL_LINES
from treadle.errors import TreadleError
from treadle.model import NodeSpec
from treadle.registry import source_digest

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

# The reaper is an image to pull (no registry here) and this module cleans up after itself.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

log = structlog.get_logger("cluster")

DEFAULT_IMAGE = "treadle:latest"
LABEL = "treadle.cluster"
RM_PORT = 7070
NM_PORT = 7071
RM_CONFIG_PATH = "/tmp/rm-config.yaml"
SECRETS_PATH = "/tmp/treadle-secrets"
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
class DockerCluster(ClusterBase):
    """An RM container, ``nm_containers`` NM host containers and (unmanaged AMs) an AM host
    container of ``image``; ``rm_address`` is the RM's address from this machine."""

    workdir: Path = Path(".treadle/docker")
    ready_timeout_s: float = 60.0
    image: str = DEFAULT_IMAGE
    nm_containers: int = 2
    cluster_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _network: Network | None = field(default=None, init=False, repr=False)
    _containers: dict[str, DockerContainer] = field(default_factory=dict, init=False, repr=False)

    mode: ClassVar[str] = "docker"
    kind: ClassVar[str] = "docker cluster"
    role_label: ClassVar[str] = "container {}"
    parts_option: ClassVar[str] = "--nm-containers"
    guard_poll_s: ClassVar[float] = 0.5
    blocking: ClassVar[bool] = True

    @property
    def parts(self) -> int:
        return self.nm_containers

    @property
    def where(self) -> str:
        return f"{self.nm_containers} NM containers of {self.image}"

    @property
    def containers(self) -> list[str]:
        """Names of the running containers: rm, nm-1, ..., am."""
        return list(self._containers)

    def preflight(self) -> None:
        if not check_image(self.image):
            log.warning(
                "image_differs_from_checkout",
                image=self.image,
                hint="its treadle was built from other sources; rebuild with deploy/build-image.sh",
            )

    # ------------------------------------------------------------------ start
    def _is_started(self) -> bool:
        return bool(self._containers)

    async def _prepare(self) -> None:
        if self.tls is not None:
            raise TreadleError(
                "docker cluster: TLS files are not copied into containers; use a local "
                "cluster, or the deploy files with --tls-* flags added"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(check_image, self.image)

    def _container(self, name: str, command: list[str]) -> DockerContainer:
        from testcontainers.core.container import DockerContainer

        assert self._network is not None
        c = DockerContainer(self.image).with_command(command)
        c.with_name(f"treadle-{self.cluster_id}-{name}").with_network(self._network)
        # with_kwargs replaces the extra arguments: the label goes in the same call.
        c.with_network_aliases(name).with_kwargs(hostname=name, labels={LABEL: self.cluster_id})
        return c

    def secrets_dir(self) -> str:
        return SECRETS_PATH

    def _copy_secrets(self, c: DockerContainer) -> None:
        """The cluster's secrets, copied in (never mounted, never in the command line)."""
        for name, text in self.secrets.files().items():
            # Copied in as root: readable by the image's user, the only one in the container.
            c.with_copy_into_container(text.encode(), f"{SECRETS_PATH}/{name}", mode=0o644)

    def _run(self, name: str, c: DockerContainer) -> None:
        self._containers[name] = c  # before start: stop() removes a half-started one
        c.start()

    async def _launch_rm(self, deadline: float) -> str:
        from testcontainers.core.network import Network

        self._network = Network(docker_network_kw={"labels": {LABEL: self.cluster_id}})
        await asyncio.to_thread(self._network.create)
        argv = self.rm_argv(
            "python3",
            listen=f"0.0.0.0:{RM_PORT}",
            advertise=f"rm:{RM_PORT}",
            config=RM_CONFIG_PATH,
            events="/tmp/rm-events.jsonl",
        )
        rm = self._container("rm", argv)
        rm.with_copy_into_container(self.rm_config_text().encode(), RM_CONFIG_PATH)
        self._copy_secrets(rm)
        # Published on loopback only, although every call is authenticated.
        rm.ports[f"{RM_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
        await asyncio.to_thread(self._run, "rm", rm)
        port = await asyncio.to_thread(rm.get_exposed_port, RM_PORT)
        return f"127.0.0.1:{port}"

    async def _launch_nm(self, name: str, nodes: Sequence[NodeSpec]) -> None:
        argv = self.nm_argv(
            "python3",
            f"rm:{RM_PORT}",
            NODES_PATH,
            listen=f"0.0.0.0:{NM_PORT}",
            advertise=f"{name}:{NM_PORT}",
        )
        nm = self._container(name, argv)
        nm.with_copy_into_container(nodes_json(nodes).encode(), NODES_PATH)
        self._copy_secrets(nm)
        await asyncio.to_thread(self._run, name, nm)

    async def _launch_am(self, deadline: float) -> None:
        am = self._container(
            "am", self.am_argv("python3", f"rm:{RM_PORT}", port_file=AM_READY_PATH)
        )
        self._copy_secrets(am)
        await asyncio.to_thread(self._run, "am", am)
        await self._wait_until(self._am_ready, deadline, "am", "was not ready", poll_s=0.1)

    def _am_ready(self) -> bool:
        result = (
            self._containers["am"].get_wrapped_container().exec_run(["test", "-e", AM_READY_PATH])
        )
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

    def _log_tail(self, name: str) -> tuple[str, str]:
        tail = ""
        c = self._containers.get(name)
        if c is not None:
            with contextlib.suppress(Exception):
                out, err = c.get_logs()
                lines = (out + err).decode(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                tail = "\n".join(lines)
        return tail, "its log"

    def kill(self, name: str) -> None:
        """SIGKILL container ``name`` (an NM host failing), expected by ``guard``."""
        self.expect_exit(name)
        self._containers[name].get_wrapped_container().kill()

    # ------------------------------------------------------------------ stop
    def _stop(self) -> None:
        import docker

        containers, self._containers = self._containers, {}
        for name in self.stop_order(list(containers)):
            wrapped = containers[name]._container  # None when creating it failed
            if wrapped is None:
                continue
            with contextlib.suppress(docker.errors.DockerException):
                wrapped.stop(timeout=max(1, round(self.stop_grace_s)))
            with contextlib.suppress(docker.errors.DockerException, OSError):
                log_file = self.log_path(name)
                log_file.write_bytes(wrapped.logs(stdout=True, stderr=True))
                self._logs[name] = log_file
            with contextlib.suppress(docker.errors.DockerException):
                wrapped.remove(force=True, v=True)
        network, self._network = self._network, None
        if network is not None and network._network is not None:
            with contextlib.suppress(docker.errors.DockerException):
                network.remove()
        with contextlib.suppress(Exception):
            remove_labelled(self.cluster_id)  # anything a failure left half-made
