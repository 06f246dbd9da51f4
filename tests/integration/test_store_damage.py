"""A damaged store gives a refusal, not wrong results (issue 26, item 3), tried as the
faults were: an empty store, one of another cluster, random bytes in its middle, a file
cut short, a WAL deleted after a kill, an event log cut short; and NM hosts refused as
UNAUTHENTICATED by an RM that no longer knows their tokens register again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rm.server.store import DB_NAME, StateStore, open_state
from tests.integration.test_identity import aio, cluster
from treadle.errors import TreadleError
from treadle.live.gate import cluster_id
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP, format_app_id

CLUSTER = "cluster-a"


def written_store(where: Path) -> Path:
    """A store of cluster ``CLUSTER`` with a clock and a few kilobytes of rows, closed."""
    store = StateStore(where, cluster=CLUSTER)
    store.save_clock(1000.0, 1.0)
    for i in range(200):
        store.save_node_token(f"n{i}", "t" * 64)
    store.close()
    return where / DB_NAME


def refusal(where: Path, cluster: str = CLUSTER) -> str:
    with pytest.raises(TreadleError) as info:
        StateStore(where, cluster=cluster)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{where / DB_NAME}: the state store is ")
    assert message.endswith("refused (--fresh-state sets it aside and starts an empty store)")
    return message


def emptied(db: Path) -> None:
    db.write_bytes(b"")


def scrambled(db: Path) -> None:
    """4 KiB of random bytes in the middle of the file."""
    data = bytearray(db.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = os.urandom(4096)
    db.write_bytes(bytes(data))


def cut_short(db: Path) -> None:
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])


def not_a_store(db: Path) -> None:
    db.write_text("some notes someone kept here\n" * 200)


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (emptied, "empty (0 bytes)"),
        (scrambled, "corrupt"),
        (cut_short, "corrupt"),
        (not_a_store, "not a treadle state store (file is not a database)"),
    ],
)
def test_a_damaged_store_is_refused_in_one_line(
    tmp_path: Path, damage: Callable[[Path], None], what: str
) -> None:
    db = written_store(tmp_path)
    damage(db)
    message = refusal(tmp_path)
    assert f"the state store is {what}" in message


def test_another_clusters_store_is_refused(tmp_path: Path) -> None:
    written_store(tmp_path)
    assert "another cluster's (its identity 'cluster-a', this RM's 'cluster-b')" in refusal(
        tmp_path, "cluster-b"
    )
    StateStore(tmp_path, cluster=CLUSTER).close()  # its own cluster opens it


def test_a_store_of_another_schema_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Refused in one line, the file as it was: no table this RM's schema adds (an older
    store of schema 1 lacked ``replay``) is created in it first."""
    db = written_store(tmp_path)
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        c.execute("DROP TABLE replay")
        c.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    before = db.read_bytes()
    assert "of schema 2, which this RM does not read (it reads 1)" in refusal(tmp_path)
    assert db.read_bytes() == before
    with contextlib.closing(sqlite3.connect(db)) as c:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "replay" not in tables


def test_a_store_written_before_priorities_were_kept_opens_with_the_defaults(
    tmp_path: Path,
) -> None:
    """Its records lack the submission's priority, type and tags (as written before they
    were kept): it opens, they read as YARN's defaults, and an RM writes them from then on."""
    from rm.core.facade import ResourceManager
    from treadle.messages import AppSubmission
    from treadle.registry import build

    rm = ResourceManager(build("policies", "fifo"), policy_errors="log")
    sub = AppSubmission("j", "alice", "default", priority=4, app_type="SPARK", tags=("a", "b"))
    old, new = (rm.submit_application(sub, 1.0) for _ in range(2))
    store = StateStore(tmp_path, cluster=CLUSTER)
    store.save_clock(1000.0, 1.0)
    store.save_apps(rm.app_records([old, new], {}), {}, new=True)
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as c, c:
        c.execute(
            "UPDATE apps SET record = json_remove(record, '$.priority', '$.app_type', '$.tags') "
            "WHERE app_id = ?",
            (old,),
        )
    store = StateStore(tmp_path, cluster=CLUSTER)
    loaded = {r.app_id: r.submission for r in store.load().apps}
    store.close()
    kept = {a: (s.priority, s.app_type, s.tags) for a, s in loaded.items()}
    assert kept == {old: (0, "", ()), new: (4, "SPARK", ("a", "b"))}


def killed_writer(where: Path) -> None:
    """A process that opens the store, commits and is killed (no clean close)."""
    code = (
        "import os, sys; from rm.server.store import StateStore; "
        f"s = StateStore({str(where)!r}, cluster={CLUSTER!r}); s.save_clock(5.0, 1.0); "
        "s.save_node_token('n1', 'x' * 32); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_store_killed_open_reopens_with_its_commits_but_not_without_its_wal(
    tmp_path: Path,
) -> None:
    killed_writer(tmp_path / "kept")
    assert (tmp_path / "kept" / (DB_NAME + "-wal")).exists()
    store = StateStore(tmp_path / "kept", cluster=CLUSTER)
    stored = store.load()
    assert (stored.epoch, stored.node_tokens) == (5.0, {"n1": "x" * 32})
    store.close()
    killed_writer(tmp_path / "lost")
    for name in (DB_NAME + "-wal", DB_NAME + "-shm"):
        (tmp_path / "lost" / name).unlink()
    assert "missing its WAL: the RM that wrote it did not close it" in refusal(tmp_path / "lost")


def test_fresh_state_sets_a_refused_store_aside(tmp_path: Path) -> None:
    db = written_store(tmp_path)
    emptied(db)
    store = StateStore(tmp_path, cluster=CLUSTER, fresh=True)
    assert store.load().empty
    store.close()
    aside = [p.name for p in tmp_path.iterdir() if ".set-aside-" in p.name]
    assert len(aside) == 1
    assert aside[0].startswith(DB_NAME + ".set-aside-")
    assert (tmp_path / aside[0]).stat().st_size == 0  # kept as it was, to look at


def events_of(apps: list[str]) -> str:
    lines = [{"t": 0.0, "event": "run_started"}]
    lines += [{"t": 1.0, "event": "job_submitted", "job": a} for a in apps]
    return "".join(json.dumps(r) + "\n" for r in lines)


def store_with_apps(where: Path, apps: list[str]) -> None:
    """A store holding ``apps`` (their records as an RM writes them)."""
    from rm.core.facade import ResourceManager
    from treadle.messages import AppSubmission
    from treadle.registry import build

    rm = ResourceManager(build("policies", "fifo"), policy_errors="log")
    ids = [rm.submit_application(AppSubmission(a, "alice", "default"), 1.0) for a in apps]
    assert ids == apps
    store = StateStore(where, cluster=CLUSTER)
    store.save_clock(1000.0, 1.0)
    store.save_apps(rm.app_records(ids, {}), {}, new=True)
    store.close()


def test_an_event_log_cut_short_is_reported_or_refused(tmp_path: Path) -> None:
    apps = [format_app_id(SIM_CLUSTER_TIMESTAMP, i) for i in range(1, 7)]
    store_with_apps(tmp_path / "state", apps)
    events = tmp_path / "events.jsonl"
    # Cut in mid-line (a kill in mid-write): the whole records are read, the tail cut off.
    events.write_text(events_of(apps) + '{"t": 2.0, "event": "job_sta')
    store, stored, previous = open_state(tmp_path / "state", str(events), cluster=CLUSTER,
                                         fresh=False)  # fmt: skip
    store.close()
    assert len(previous) == 7
    assert events.read_text() == events_of(apps)  # the stream continues on a line of its own
    # Cut to a third: the store holds applications the log never saw submitted.
    events.write_text(events_of(apps[:2]))
    with pytest.raises(TreadleError) as info:
        open_state(tmp_path / "state", str(events), cluster=CLUSTER, fresh=False)
    assert str(info.value) == (
        f"{events}: the event log lacks the submissions of 4 application(s) the state store "
        f"holds ({', '.join(apps[2:5])}, ...): cut short; "
        "refused (--fresh-state starts a new run)"
    )
    # A damaged line in the middle.
    events.write_text(events_of(apps).replace(f'"job_submitted", "job": "{apps[1]}"}}',
                                              '"job_su\x00\x00'))  # fmt: skip
    with pytest.raises(TreadleError, match="line 3 of the event log is not a record"):
        open_state(tmp_path / "state", str(events), cluster=CLUSTER, fresh=False)
    # --fresh-state: both set aside, a new run starts.
    store, stored, previous = open_state(tmp_path / "state", str(events), cluster=CLUSTER,
                                         fresh=True)  # fmt: skip
    store.close()
    assert stored.empty
    assert previous == []
    assert not events.exists()


def test_the_rm_process_refuses_a_damaged_store_unless_fresh_state(tmp_path: Path) -> None:
    (tmp_path / "acl").write_text("alice user alice-key-0123456789\n")
    (tmp_path / "node-secret").write_text("n" * 24)
    for name in ("acl", "node-secret"):
        (tmp_path / name).chmod(0o600)
    (tmp_path / "state").mkdir(mode=0o700)
    db = tmp_path / "state" / DB_NAME
    db.touch(mode=0o600)  # the 0-byte store of the issue
    argv = [sys.executable, "-m", "rm", "--policy", "fifo", "--acl", str(tmp_path / "acl"),
            "--node-secret-file", str(tmp_path / "node-secret"),
            "--state-dir", str(tmp_path / "state"),
            "--port-file", str(tmp_path / "port")]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"python -m rm: error: {db}: the state store is empty (0 bytes); refused "
        "(--fresh-state sets it aside and starts an empty store)"
    )
    proc = subprocess.Popen([*argv, "--fresh-state"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "port").exists():
            assert proc.poll() is None, "the RM exited"
            assert time.monotonic() < deadline, "the RM did not start"
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    assert any(".set-aside-" in p.name for p in (tmp_path / "state").iterdir())
    # The store it made names this cluster: the node secret's digest.
    StateStore(tmp_path / "state", cluster=cluster_id(b"n" * 24)).close()
    assert "another cluster's" in refusal(tmp_path / "state", cluster_id(b"m" * 24))


@aio
async def test_an_nm_refused_as_unauthenticated_registers_again(tmp_path: Path) -> None:
    """The RM forgot the node and its token (as a restarted RM on a new store does): the
    NM host's next heartbeat is UNAUTHENTICATED, and it registers again at once."""
    async with cluster(tmp_path) as c:
        assert c.gate is not None
        old = c.host.tokens["n1"]
        c.rm.lose_node("n1", c.host.clock.now())
        c.gate.node_tokens.clear()
        c.host.interval_s = 0.05
        stop = asyncio.Event()
        loop = asyncio.create_task(c.host.heartbeat_loop(stop))
        try:
            deadline = time.monotonic() + 10
            while c.host.tokens["n1"] == old:
                assert time.monotonic() < deadline, "the NM never registered again"
                await asyncio.sleep(0.05)
            assert c.gate.node_tokens["n1"] == c.host.tokens["n1"]
            assert c.rm.state.nodes["n1"].alive
        finally:
            stop.set()
            loop.cancel()
