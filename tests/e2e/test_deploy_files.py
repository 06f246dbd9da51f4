"""deploy/compose.yaml with Debian's docker-compose (v1) and deploy/stack.yaml on a
single-node Docker Swarm: a small workload runs to the end, bad settings end the run fast
with the reason in the output, and everything the test deployed is removed afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _named(prefix: str) -> list[str]:
    """Containers, networks and volumes whose name starts with ``prefix``."""
    names = []
    for kind in ("container", "network", "volume"):
        extra = ["--all"] if kind == "container" else []
        res = _docker(
            kind, "ls", *extra, "--format", "{{.Names}}" if kind == "container" else "{{.Name}}"
        )
        names += [n for n in res.stdout.split() if n.startswith(prefix)]
    return names


def _env(image: str, **settings: str) -> dict[str, str]:
    return dict(os.environ, IMAGE=image, WORKLOAD="tiny", NM_COUNT="1", NODES="2", **settings)


@pytest.fixture
def compose_project(image: str) -> Iterator[tuple[list[str], str]]:
    if shutil.which("docker-compose") is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose (v1) must be installed in CI")
        pytest.skip("docker-compose (v1) is not installed")
    project = f"tdc{uuid.uuid4().hex[:8]}"
    base = ["docker-compose", "-p", project, "-f", str(DEPLOY / "compose.yaml")]
    try:
        yield base, project
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], capture_output=True,
                       timeout=120, env=_env(image), check=False)  # fmt: skip
        assert _named(f"{project}_") == []


def test_compose_v1_runs_a_workload_to_the_end(
    image: str, compose_project: tuple[list[str], str]
) -> None:
    base, _ = compose_project
    res = subprocess.run(
        [*base, "up", "--scale", "nm=2", "--abort-on-container-exit", "--exit-code-from",
         "driver"],
        capture_output=True, text=True, timeout=300, env=_env(image, POLICY="drf"),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "drf: 2/2 jobs" in res.stdout


def test_compose_bad_setting_fails_fast_with_the_reason(
    image: str, compose_project: tuple[list[str], str]
) -> None:
    base, _ = compose_project
    res = subprocess.run(
        [*base, "up", "--abort-on-container-exit", "--exit-code-from", "driver"],
        capture_output=True, text=True, timeout=300,
        env=_env(image, POLICY="drf", POLICY_SET="across=planets"),
    )  # fmt: skip
    assert res.returncode != 0
    assert "parameter 'across'" in res.stdout, res.stdout[-3000:]
    # Fast: the run ended on the refusal, not when a process gave up waiting for the RM
    # (the driver's --rm-wait-s 60 ends with "(waited 60 s)").
    assert "(waited" not in res.stdout, res.stdout[-3000:]


@pytest.fixture
def swarm(image: str) -> None:
    state = _docker("info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip()
    if state != "active":
        if os.environ.get("CI"):
            pytest.fail(f"the Docker engine must be a swarm node in CI (state {state!r})")
        pytest.skip("this Docker engine is not a swarm node (docker swarm init)")


def _service_state(stack: str, service: str) -> str:
    res = _docker("service", "ps", f"{stack}_{service}", "--format", "{{.CurrentState}}")
    return res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""


def test_swarm_stack_runs_a_workload_on_a_single_node_swarm(image: str, swarm: None) -> None:
    stack = f"tst{uuid.uuid4().hex[:8]}"
    # The driver replays only once both NM tasks registered their node (NODES=2).
    env = _env(image, POLICY="fifo", NM_REPLICAS="2")
    try:
        made = subprocess.run(
            [str(DEPLOY / "swarm-secrets.sh")], capture_output=True, text=True, timeout=60
        )
        assert made.returncode == 0, made.stderr
        res = subprocess.run(
            ["docker", "stack", "deploy", "-c", str(DEPLOY / "stack.yaml"), stack],
            capture_output=True, text=True, timeout=120, env=env, check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 180
        state = ""
        while time.monotonic() < deadline:
            state = _service_state(stack, "driver")
            if state.startswith(("Complete", "Failed", "Rejected", "Shutdown")):
                break
            time.sleep(2)
        logs = _docker("service", "logs", f"{stack}_driver").stdout
        assert state.startswith("Complete"), (state, logs[-2000:])
        assert "fifo: 2/2 jobs" in logs
    finally:
        _docker("stack", "rm", stack, timeout=120)
        deadline = time.monotonic() + 60
        while _named(f"{stack}_") and time.monotonic() < deadline:
            time.sleep(1)
            _docker(
                "container", "prune", "-f", "--filter", f"label=com.docker.stack.namespace={stack}"
            )
            _docker("network", "rm", f"{stack}_treadle")
        for volume in ("results", "rm-state", "nm-work"):  # the stack's named volumes
            _docker("volume", "rm", f"{stack}_{volume}")
    assert _named(f"{stack}_") == []
