"""State and secrets are private at rest (issue 26, item 2), tried as the attack was:
another local account (``nobody``, through a child process that drops root) reads what a
cluster and a run leave in the cluster directory; and the RM and NM hosts refuse to start
on a secret, store or event log other accounts may read, in one line.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rm.server.store import DB_NAME, StateStore


def nobody() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("reading as another account needs root to drop to it")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no account 'nobody' on this machine")


def nobody_reads(path: Path) -> bool:
    """Whether the account nobody can read ``path`` (``cat`` in a child that dropped root)."""
    who = nobody()
    run = subprocess.run(
        ["cat", str(path)], user=who.pw_uid, group=who.pw_gid, extra_groups=[],
        capture_output=True, timeout=30,
    )  # fmt: skip
    return run.returncode == 0


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every account may enter (not pytest's private tmp_path), so that
    only the modes of what is made inside it protect it."""
    path = Path(tempfile.mkdtemp(prefix="treadle-private-", dir="/tmp"))  # all enter /tmp
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treadle.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def open_to_others(root: Path) -> list[str]:
    """Every file or directory under ``root`` whose mode lets group or others in."""
    return [
        f"{p.relative_to(root)} {p.stat().st_mode & 0o777:04o}"
        for p in sorted(root.rglob("*"))
        if not p.is_symlink() and p.stat().st_mode & 0o077
    ]


def test_nothing_a_cluster_and_a_run_leave_is_readable_by_another_account(
    open_dir: Path,
) -> None:
    nobody()
    control = open_dir / "control"
    control.write_text("a file anyone may read\n")
    control.chmod(0o644)
    assert nobody_reads(control)  # the probe can see what is open
    up = cli(["cluster", "up", "--workload", "tiny", "--policy", "fifo", "--dilation", "20"],
             open_dir)  # fmt: skip
    cluster = open_dir / ".treadle" / "cluster"
    try:
        assert up.returncode == 0, up.stderr
        run = cli(["run", "tiny", "--rm", up.stdout.strip(), "--out", "out", "--no-slowdown"],
                  open_dir)  # fmt: skip
        assert run.returncode == 0, run.stderr
        files = [p for p in cluster.rglob("*") if p.is_file()]
        names = {p.name for p in files}
        assert {"acl", "node-secret", "treadle.key", DB_NAME, "rm-events.jsonl"} <= names
        assert DB_NAME + "-wal" in names  # the store is open: its WAL is there too
        assert open_to_others(cluster) == []
        assert cluster.stat().st_mode & 0o777 == 0o700
        readable = [str(p.relative_to(cluster)) for p in files if nobody_reads(p)]
        assert readable == []
    finally:
        down = cli(["cluster", "down"], open_dir)
    assert down.returncode == 0, down.stderr
    assert open_to_others(cluster) == []


def secrets(where: Path) -> tuple[Path, Path]:
    acl, secret = where / "acl", where / "node-secret"
    for path, text in ((acl, "alice user alice-key-0123456789\n"), (secret, "n" * 24)):
        path.write_text(text)
        path.chmod(0o600)
    return acl, secret


def rm_refusal(where: Path, *extra: str) -> str:
    """The one line ``python -m rm`` exits 2 with, on the secrets in ``where``."""
    acl, secret = where / "acl", where / "node-secret"
    run = subprocess.run(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--acl", str(acl),
         "--node-secret-file", str(secret), "--port-file", str(where / "port"), *extra],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert not (where / "port").exists()  # it never served
    return run.stderr.strip()


def test_the_rm_refuses_to_start_on_a_loose_secret(tmp_path: Path) -> None:
    acl, secret = secrets(tmp_path)
    acl.chmod(0o644)
    assert rm_refusal(tmp_path) == (
        f"python -m rm: error: {acl}: the ACL file is open to other accounts (mode 0644); "
        f"chmod 600 {acl}"
    )
    acl.chmod(0o600)
    secret.chmod(0o640)
    assert rm_refusal(tmp_path).endswith(
        f"{secret}: the node secret is open to other accounts (mode 0640); chmod 600 {secret}"
    )


def test_the_rm_refuses_a_store_or_event_log_others_can_read(tmp_path: Path) -> None:
    secrets(tmp_path)
    store = StateStore(tmp_path / "state")
    store.save_clock(1.0, 1.0)
    store.close()
    db = tmp_path / "state" / DB_NAME
    db.chmod(0o644)
    assert rm_refusal(tmp_path, "--state-dir", str(tmp_path / "state")).endswith(
        f"{db}: the state store is open to other accounts (mode 0644); chmod 600 {db}"
    )
    events = tmp_path / "events.jsonl"
    events.write_text("")
    events.chmod(0o604)
    assert "the event log is open to other accounts (mode 0604)" in rm_refusal(
        tmp_path, "--events", str(events)
    )


def test_the_nm_refuses_to_start_on_a_loose_node_secret(tmp_path: Path) -> None:
    _, secret = secrets(tmp_path)
    secret.chmod(0o644)
    run = subprocess.run(
        [sys.executable, "-m", "nm", "--rm", "127.0.0.1:1", "--node-secret-file", str(secret)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == (
        f"python -m nm: error: {secret}: the node secret is open to other accounts "
        f"(mode 0644); chmod 600 {secret}"
    )
    secret.chmod(0o600)
    tokens = tmp_path / "work" / "node-tokens.json"
    tokens.parent.mkdir()
    tokens.write_text("{}")
    tokens.chmod(0o644)
    run = subprocess.run(
        [sys.executable, "-m", "nm", "--rm", "127.0.0.1:1", "--node-secret-file", str(secret),
         "--work-dir", str(tokens.parent)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().endswith(
        f"{tokens}: the node token file is open to other accounts (mode 0644); chmod 600 {tokens}"
    )


def test_a_new_store_is_private_from_its_first_byte_whatever_the_umask(open_dir: Path) -> None:
    old = os.umask(0o022)  # the usual umask: files 0644 unless made otherwise
    try:
        store = StateStore(open_dir / "state")
        store.save_clock(1.0, 1.0)
        files = sorted(p.name for p in (open_dir / "state").iterdir())
        assert files == [DB_NAME, DB_NAME + "-shm", DB_NAME + "-wal"]
        assert open_to_others(open_dir / "state") == []
        assert (open_dir / "state").stat().st_mode & 0o777 == 0o700
        if os.geteuid() == 0:
            assert not nobody_reads(open_dir / "state" / DB_NAME)
        store.close()
    finally:
        os.umask(old)
