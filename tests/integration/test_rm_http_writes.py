"""YARN's REST writes on a real ``python -m rm`` (port 0): new-application, submit (with
and without a DAG in ``TREADLE_DAG``), state GET and PUT (kill), queue PUT (move),
priority PUT, appstatistics and an attempt's containers; refusals as YARN's
RemoteException (400 bad body, 404 unknown id, 403 another user's app). In simple mode
(``--insecure``) ``?user.name=`` names the caller; on a secured RM the same calls are
signed (``rm.server.http_auth.SignedAuth``), a stranger gets 401, another user 403, and
the app stays as it was. The last test drives ``treadle cluster up --insecure`` with
``yarn-api-client`` from PyPI, unmodified."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from yarn_api_client import ResourceManager as YarnRM
from yarn_api_client.errors import APIError

from rm.server.http_auth import SignedAuth
from treadle.live import auth
from treadle.yarnids import format_attempt_id

WS = "/ws/v1/cluster"
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789xx"}
RM_YAML = "queues:\n  - {name: default}\n  - {name: other}\n"
DAG = {
    "stages": [
        {"name": "map", "tasks": 3, "duration_s": 5, "resources": {"vcores": 1, "memory_mb": 512}},
        {"name": "reduce", "durations": [2.0], "resources": {"vcores": 1, "memory_mb": 512},
         "parents": ["map"]},
    ]
}  # fmt: skip


@contextmanager
def rm_process(tmp_path: Path, *, secured: bool, store: bool = False) -> Iterator[str]:
    """``python -m rm`` (fifo, queues default and other) with an HTTP port (and a state
    store in ``tmp_path``): its URL."""
    (tmp_path / "rm.yaml").write_text(RM_YAML)
    identity = ["--insecure"]
    if secured:
        acl, secret = tmp_path / "acl", tmp_path / "node-secret"
        acl.write_text("".join(f"{u} user {k}\n" for u, k in KEYS.items()))
        secret.write_text("node-secret-0123456789\n")
        for f in (acl, secret):
            f.chmod(0o600)
        identity = ["--acl", str(acl), "--node-secret-file", str(secret)]
    if store:
        events = str(tmp_path / "events.jsonl")
        identity += ["--state-dir", str(tmp_path / "state"), "--events", events]
    http = tmp_path / "rm.http"
    http.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--config", str(tmp_path / "rm.yaml"),
         *identity, "--http-port", "0", "--http-port-file", str(http), "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (http.exists() and http.read_text().strip()):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the RM wrote no HTTP port file"
            time.sleep(0.05)
        yield http.read_text().strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


Call = Callable[..., requests.Response]


def simple(url: str, user: str | None) -> Call:
    """Requests in simple mode as ``user`` (``?user.name=``; None: anonymous)."""

    def call(verb: str, path: str, body: Any = None, **params: str) -> requests.Response:
        if user is not None:
            params["user.name"] = user
        return requests.request(verb, url + WS + path, json=body, params=params, timeout=10)

    return call


def signed(url: str, user: str | None) -> Call:
    """Signed requests as ``user`` (None: a stranger, unsigned)."""
    sign = SignedAuth(auth.Credentials(user, KEYS[user].encode())) if user else None

    def call(verb: str, path: str, body: Any = None, **params: str) -> requests.Response:
        return requests.request(
            verb, url + WS + path, json=body, params=params, auth=sign, timeout=10
        )

    return call


def submission(
    app_id: str, *, dag: bool | dict[str, Any], queue: str = "default", unmanaged: bool = False
) -> dict[str, Any]:
    """A YARN submission context; ``dag``: ``DAG`` (True), another, or none (False)."""
    spec: dict[str, Any] = {"commands": {"command": "sleep 5"}}
    if dag:
        text = json.dumps(DAG if dag is True else dag)
        spec["environment"] = {"entry": [{"key": "TREADLE_DAG", "value": text}]}
    return {
        "application-id": app_id,
        "application-name": "rest-job",
        "queue": queue,
        "priority": 3,
        "resource": {"memory": 1024, "vCores": 1},
        "am-container-spec": spec,
        "unmanaged-AM": unmanaged,
        "max-app-attempts": 2,
        "application-type": "YARN",
        "application-tags": {"tag": ["rest", "test"]},
    }


def new_and_submit(call: Call, *, dag: bool = True) -> str:
    new = call("POST", "/apps/new-application")
    assert new.status_code == 200, new.text
    body = new.json()
    app_id = body["application-id"]
    assert "memory" in body["maximum-resource-capability"]
    sub = call("POST", "/apps", submission(app_id, dag=dag))
    assert sub.status_code == 202, sub.text
    assert sub.headers["Location"].endswith(f"/apps/{app_id}")
    return str(app_id)


def assert_remote(r: requests.Response, status: int, exception: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["RemoteException"]["exception"] == exception


def exercise_writes(call: Call) -> str:
    """Every write, as the app's owner; the app's id (killed at the end)."""
    app_id = new_and_submit(call)
    app = call("GET", f"/apps/{app_id}").json()["app"]
    assert (app["name"], app["user"], app["queue"]) == ("rest-job", "alice", "default")
    extras = (app["priority"], app["applicationType"], app["applicationTags"])
    assert extras == (3, "YARN", "rest,test")
    assert app["pendingContainers"] >= 0
    assert call("GET", f"/apps/{app_id}/state").json() == {"state": "ACCEPTED"}
    assert call("GET", f"/apps/{app_id}/queue").json() == {"queue": "default"}
    moved = call("PUT", f"/apps/{app_id}/queue", {"queue": "other"})
    assert moved.json() == {"queue": "other"}, moved.text
    assert call("GET", f"/apps/{app_id}").json()["app"]["queue"] == "other"
    assert call("PUT", f"/apps/{app_id}/priority", {"priority": 7}).json() == {"priority": 7}
    assert call("GET", f"/apps/{app_id}/priority").json() == {"priority": 7}
    stats = call("GET", "/appstatistics", states="ACCEPTED", applicationTypes="YARN").json()
    assert stats == {"appStatInfo": {"statItem": [{"state": "ACCEPTED", "type": "yarn",
                                                   "count": 1}]}}  # fmt: skip
    # No node, no AM attempt yet: attempt 1 is not known (a cluster's are: the last test).
    attempt = format_attempt_id(app_id, 1)
    containers = call("GET", f"/apps/{app_id}/appattempts/{attempt}/containers")
    assert_remote(containers, 404, "NotFoundException")
    # Bad bodies, unknown ids.
    assert_remote(call("PUT", f"/apps/{app_id}/state", {"state": "RUNNING"}), 400,
                  "BadRequestException")  # fmt: skip
    assert_remote(call("PUT", f"/apps/{app_id}/queue", {"queue": "nowhere"}), 400,
                  "BadRequestException")  # fmt: skip
    assert_remote(call("PUT", f"/apps/{app_id}/priority", {"priority": "high"}), 400,
                  "BadRequestException")  # fmt: skip
    bad = call("POST", "/apps", {"application-name": "x", "unmanaged-AM": "yes"})
    assert_remote(bad, 400, "BadRequestException")
    dag = {"key": "TREADLE_DAG", "value": "{not json"}
    bad = call("POST", "/apps", {"am-container-spec": {"environment": {"entry": [dag]}}})
    assert_remote(bad, 400, "BadRequestException")
    assert "TREADLE_DAG" in bad.json()["RemoteException"]["message"]
    assert_remote(call("GET", "/apps/application_99999/state"), 404, "NotFoundException")
    assert_remote(call("PUT", "/apps/application_99999/state", {"state": "KILLED"}), 404,
                  "NotFoundException")  # fmt: skip
    # Kill: KILLED at once; killing again answers the final state.
    assert call("PUT", f"/apps/{app_id}/state", {"state": "KILLED"}).json() == {"state": "KILLED"}
    assert call("GET", f"/apps/{app_id}/state").json() == {"state": "KILLED"}
    assert call("PUT", f"/apps/{app_id}/state", {"state": "KILLED"}).json() == {"state": "KILLED"}
    return app_id


def refused_and_unchanged(owner: Call, app_id: str, *, other: Call, nobody: Call) -> None:
    """Another user's changes to ``owner``'s app get 403, an unnamed caller's 401; the app
    stays as it was."""
    for path, body in (
        ("/state", {"state": "KILLED"}),
        ("/queue", {"queue": "other"}),
        ("/priority", {"priority": 1}),
    ):
        assert_remote(other("PUT", f"/apps/{app_id}{path}", body), 403, "ForbiddenException")
        assert_remote(nobody("PUT", f"/apps/{app_id}{path}", body), 401,
                      "AuthenticationException")  # fmt: skip
    after = owner("GET", f"/apps/{app_id}").json()["app"]
    assert (after["state"], after["queue"], after["priority"]) == ("ACCEPTED", "default", 3)


def test_simple_mode_writes(tmp_path: Path) -> None:
    with rm_process(tmp_path, secured=False) as url:
        alice, bob, anonymous = simple(url, "alice"), simple(url, "bob"), simple(url, None)
        exercise_writes(alice)
        # The default job (no DAG): one task of the submission's resource.
        app_id = new_and_submit(alice, dag=False)
        app = alice("GET", f"/apps/{app_id}").json()["app"]
        assert (app["user"], app["state"]) == ("alice", "ACCEPTED")
        # Another user may not change alice's app; an anonymous write names nobody.
        refused_and_unchanged(alice, app_id, other=bob, nobody=anonymous)
        assert_remote(anonymous("POST", "/apps", submission("", dag=False)), 401,
                      "AuthenticationException")  # fmt: skip
        # Reads stay open to everyone, as before.
        assert anonymous("GET", f"/apps/{app_id}/state").json() == {"state": "ACCEPTED"}
        # A reused id is refused.
        reused = alice("POST", "/apps", submission(app_id, dag=False))
        assert_remote(reused, 400, "BadRequestException")


def test_secured_writes_signed_and_refused(tmp_path: Path) -> None:
    with rm_process(tmp_path, secured=True) as url:
        alice, bob, stranger = signed(url, "alice"), signed(url, "bob"), signed(url, None)
        exercise_writes(alice)
        app_id = new_and_submit(alice)
        refused_and_unchanged(alice, app_id, other=bob, nobody=stranger)
        assert_remote(stranger("POST", "/apps/new-application"), 401, "AuthenticationException")
        # user.name means nothing on a secured RM.
        assert_remote(simple(url, "alice")("PUT", f"/apps/{app_id}/state", {"state": "KILLED"}),
                      401, "AuthenticationException")  # fmt: skip
        # A body changed after signing is refused.
        req = requests.Request(
            "PUT",
            f"{url}{WS}/apps/{app_id}/state",
            json={"state": "KILLED"},
            auth=SignedAuth(auth.Credentials("alice", KEYS["alice"].encode())),
        )
        prepared = req.prepare()  # fmt: skip
        prepared.body = b'{"state": "KILLED", "x": 1}'
        prepared.headers["Content-Length"] = str(len(prepared.body))
        with requests.Session() as session:
            assert session.send(prepared, timeout=10).status_code == 401
        assert alice("GET", f"/apps/{app_id}/state").json() == {"state": "ACCEPTED"}


def test_a_rest_submission_and_its_move_survive_an_rm_restart(tmp_path: Path) -> None:
    """The queue it was moved to, its priority as last set (PUT), its type and tags; of a
    killed one too."""
    with rm_process(tmp_path, secured=False, store=True) as url:
        alice = simple(url, "alice")
        app_id = new_and_submit(alice)
        assert alice("PUT", f"/apps/{app_id}/queue", {"queue": "other"}).status_code == 200
        assert alice("PUT", f"/apps/{app_id}/priority", {"priority": 9}).status_code == 200
        killed = new_and_submit(alice, dag=False)
        assert alice("PUT", f"/apps/{killed}/state", {"state": "KILLED"}).status_code == 200
    with rm_process(tmp_path, secured=False, store=True) as url:
        alice = simple(url, "alice")
        app = alice("GET", f"/apps/{app_id}").json()["app"]
        assert (app["name"], app["user"], app["queue"]) == ("rest-job", "alice", "other")
        assert app["state"] == "ACCEPTED"
        assert (app["priority"], app["applicationType"], app["applicationTags"]) == (
            9, "YARN", "rest,test")  # fmt: skip
        assert alice("GET", f"/apps/{app_id}/priority").json() == {"priority": 9}
        ended = alice("GET", f"/apps/{killed}").json()["app"]
        assert (ended["state"], ended["priority"], ended["applicationType"]) == (
            "KILLED", 3, "YARN")  # fmt: skip
        stats = alice("GET", "/appstatistics", applicationTypes="YARN").json()
        counts = {i["state"]: i["count"] for i in stats["appStatInfo"]["statItem"]}
        assert (counts["ACCEPTED"], counts["KILLED"]) == (1, 1)
        # Set again after the restart, and kept.
        assert alice("PUT", f"/apps/{app_id}/priority", {"priority": 2}).status_code == 200
        assert alice("GET", f"/apps/{app_id}").json()["app"]["priority"] == 2


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "treadle.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@contextmanager
def insecure_cluster(tmp_path: Path, *flags: str) -> Iterator[tuple[dict[str, Any], str]]:
    """``treadle cluster up --insecure FLAGS``: its cluster.json and its one warning line;
    taken down after."""
    up = cli(["cluster", "up", "--insecure", "--policy", "fifo", *flags], tmp_path)
    assert up.returncode == 0, up.stderr
    try:
        warnings = [line for line in up.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1, up.stderr
        assert "--insecure" in warnings[0]
        yield json.loads((tmp_path / ".treadle/cluster/cluster.json").read_text()), warnings[0]
    finally:
        down = cli(["cluster", "down"], tmp_path)
        assert down.returncode == 0, down.stderr


@pytest.mark.slow
def test_yarn_api_client_against_cluster_up_insecure(tmp_path: Path) -> None:
    """yarn-api-client from PyPI, unmodified (the user named by its requests session's
    query parameters), against ``treadle cluster up --insecure``: a DAG job submitted,
    run to its end by the cluster's AM, and a second one killed after a move."""
    with insecure_cluster(tmp_path, "--nodes", "2", "--dilation", "20") as (state, warning):
        assert "listens on 127.0.0.1 only" in warning
        url = state["http"]
        assert url.startswith("http://127.0.0.1:")
        assert requests.get(f"{url}{WS}/info", timeout=10).status_code == 200  # no 401
        yarn = YarnRM([url], timeout=10)
        yarn.session.params = {"user.name": "alice"}
        app_id = yarn.cluster_new_application().data["application-id"]
        long_dag = {"stages": [{"name": "work", "tasks": 2, "duration_s": 60}]}  # 3 wall s
        # Unmanaged: the cluster's AM host runs it (a managed AM needs `--managed-am`).
        yarn.cluster_submit_application(submission(app_id, dag=long_dag, unmanaged=True))
        assert yarn.cluster_application(app_id).data["app"]["user"] == "alice"
        assert yarn.cluster_application_state(app_id).data["state"] in ("ACCEPTED", "RUNNING")
        assert yarn.cluster_change_application_priority(app_id, 5).data == {"priority": 5}
        assert yarn.cluster_get_application_priority(app_id).data == {"priority": 5}
        deadline = time.monotonic() + 90
        while yarn.cluster_application(app_id).data["app"]["runningContainers"] < 2:
            assert time.monotonic() < deadline, yarn.cluster_application(app_id).data
            time.sleep(0.2)
        attempts = yarn.cluster_application_attempts(app_id).data["appAttempts"]["appAttempt"]
        attempt = attempts[-1]["appAttemptId"]
        running = yarn.cluster_application_attempt_containers(app_id, attempt).data["container"]
        assert len(running) == 2  # its two tasks' (an unmanaged AM has no container)
        assert all(c["containerId"].startswith("container_") for c in running)
        while yarn.cluster_application_state(app_id).data["state"] != "FINISHED":
            assert time.monotonic() < deadline, yarn.cluster_application(app_id).data
            time.sleep(0.5)
        ended = yarn.cluster_application_attempt_containers(app_id, attempt).data
        assert ended == {"container": []}  # it ended: no container runs
        stats = yarn.cluster_application_statistics(states=["FINISHED"]).data
        assert stats["appStatInfo"]["statItem"] == [{"state": "FINISHED", "type": "*",
                                                     "count": 1}]  # fmt: skip
        second = yarn.cluster_new_application().data["application-id"]
        yarn.cluster_submit_application(submission(second, dag=False))
        moved = yarn.cluster_change_application_queue(second, "default")
        assert moved.data == {"queue": "default"}
        assert yarn.cluster_get_application_queue(second).data == {"queue": "default"}
        yarn.session.params = {"user.name": "bob"}
        with pytest.raises(APIError, match="403"):
            yarn.cluster_application_kill(second)
        yarn.session.params = {"user.name": "alice"}
        yarn.cluster_application_kill(second)
        assert yarn.cluster_application_state(second).data["state"] == "KILLED"
        assert yarn.cluster_applications().data["apps"]["app"]
        assert yarn.cluster_metrics().data["clusterMetrics"]["appsKilled"] == 1


@pytest.mark.slow
def test_cluster_up_insecure_on_a_given_address(tmp_path: Path) -> None:
    """``--host`` widens where the RM listens; the one warning line says where."""
    with insecure_cluster(tmp_path, "--host", "0.0.0.0", "--nodes", "1") as (state, warning):
        assert "listens on 0.0.0.0" in warning
        assert state["rm"].startswith("0.0.0.0:")
        assert state["secrets"] is None
        info = requests.get(f"{state['http']}{WS}/info", timeout=10)
        assert info.json()["clusterInfo"]["haState"] == "ACTIVE"
        status = cli(["cluster", "status", "--json"], tmp_path)
        assert json.loads(status.stdout)["rm_metrics"]["nodes"] == 1  # unsigned, and heard
