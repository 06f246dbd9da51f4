"""treadle.live.auth: signatures, the replay window, the ACL file and its reloads."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from treadle.errors import InputError
from treadle.live import auth


def test_a_signature_binds_method_user_timestamp_and_body() -> None:
    key = b"k" * 20
    data = auth.canonical("/treadle.v1.Client/KillApplication", "alice", 5, b"body")
    sig = auth.sign(key, data)
    assert auth.verify(key, data, sig)
    for other in (
        auth.canonical("/treadle.v1.Client/GetEvents", "alice", 5, b"body"),
        auth.canonical("/treadle.v1.Client/KillApplication", "bob", 5, b"body"),
        auth.canonical("/treadle.v1.Client/KillApplication", "alice", 6, b"body"),
        auth.canonical("/treadle.v1.Client/KillApplication", "alice", 5, b"bodY"),
    ):
        assert not auth.verify(key, other, sig)
    assert not auth.verify(b"x" * 20, data, sig)


NOW = 10_000  # the server's clock, ns: every timestamp here is behind it


def test_the_replay_window_accepts_each_timestamp_once() -> None:
    w = auth.ReplayWindow(window_ns=100, floor_ns=1000)
    assert w.check("alice", 1000, NOW) is not None  # not after the server started
    assert w.check("alice", 1500, NOW) is None
    assert "already used" in (w.check("alice", 1500, NOW) or "")
    assert w.check("alice", 1450, NOW) is None  # out of order, inside the window: once
    assert w.check("alice", 1450, NOW) is not None
    assert "older than the replay window" in (w.check("alice", 1400, NOW) or "")
    assert w.check("bob", 1400, NOW) is None  # per user
    for t in range(2000, 2200):  # only the window's timestamps are kept
        assert w.check("alice", t, NOW) is None
    assert len(w._seen["alice"]) == 100
    assert w.check("alice", 2099, NOW) is not None  # left the window (and forgotten): refused
    assert w.check("alice", 2100, NOW) is not None  # inside it: remembered, refused


def test_the_replay_window_goes_on_from_a_previous_runs_newest_timestamps() -> None:
    kept: list[tuple[str, int]] = []
    w = auth.ReplayWindow(window_ns=100, floor_ns=1000)
    w.on_accept = lambda user, ts: kept.append((user, ts))
    assert w.check("alice", 1500, NOW) is None
    assert w.check("alice", 1450, NOW) is None  # out of order: not a new newest, not kept
    assert kept == [("alice", 1500)]
    again = auth.ReplayWindow(window_ns=100, floor_ns=1000)  # the restarted server
    again.restore(dict(kept))
    assert "older than the replay window" in (again.check("alice", 1500, NOW) or "")
    assert again.check("alice", 1450, NOW) is not None  # nothing at or below it, window or not
    assert again.check("alice", 1501, NOW) is None
    assert again.check("bob", 1200, NOW) is None  # other users as before


def test_a_timestamp_beyond_the_clock_skew_is_refused_and_locks_nobody_out() -> None:
    """A call signed an hour ahead is refused, and its user's next call, signed now, is
    taken: the refused timestamp did not become the user's newest (nor was it kept)."""
    kept: list[tuple[str, int]] = []
    w = auth.ReplayWindow(window_ns=100, floor_ns=1000, max_skew_ns=50)
    w.on_accept = lambda user, ts: kept.append((user, ts))
    assert "ahead of the RM's clock" in (w.check("alice", 2051, 2000) or "")
    assert kept == []
    assert w.check("alice", 2050, 2000) is None  # at the skew: taken
    assert w.check("alice", 2001, 2000) is None  # inside the window below it


def test_the_gate_refuses_a_call_signed_an_hour_ahead_and_takes_the_next(tmp_path: Path) -> None:
    """Through the RM's gate, on the wall clock, with its default skew (300 s)."""
    from treadle.live.gate import Gate

    acl = tmp_path / "acl"
    acl.write_text("alice user alice-key-0123456789\n")
    gate = Gate(auth.AclFile(acl), b"node-secret-0123456789")
    alice = auth.Credentials("alice", b"alice-key-0123456789")
    method = "/treadle.v1.Client/ListApplications"

    def call(ts: int) -> str:
        try:
            return gate.client(method, b"", auth.signed_metadata(alice, method, b"", ts)).user
        except auth.UnauthenticatedError as e:
            return str(e)

    now = time.time_ns()
    assert "3600 s ahead of the RM's clock" in call(now + 3600 * 10**9)
    assert call(now + 1) == "alice"  # not locked out
    assert call(now + 240 * 10**9) == "alice"  # a clock 4 minutes fast is taken


def test_stamps_strictly_increase() -> None:
    s = auth.Stamper()
    stamps = [s.next() for _ in range(1000)]
    assert all(b > a for a, b in itertools.pairwise(stamps))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice\n", "line 1: expected 'user role key', got 1 fields"),
        ("alice root 0123456789abcdef\n", "line 1: role must be one of user, admin"),
        ("# c\n\nalice user short\n", "line 3: the key of 'alice' is shorter than 16"),
        ("a user 0123456789abcdef\na admin 0123456789abcdef\n", "line 2: user 'a' is listed twice"),
        ("nodemanager admin 0123456789abcdef\n", "reserved for NodeManagers"),
    ],
)
def test_a_bad_acl_line_is_named(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        auth.parse_acl(text, "acl.txt")


def test_the_acl_file_reloads_on_change_and_keeps_the_last_good_entries(tmp_path: Path) -> None:
    path = tmp_path / "acl"
    path.write_text("alice user 0123456789abcdef\n")
    acl = auth.AclFile(path)
    assert set(acl.current()) == {"alice"}
    path.write_text("alice user 0123456789abcdef\nbob admin 0123456789abcdefgh\n")
    os.utime(path, ns=(1, 10**18))
    assert acl.current()["bob"].role == "admin"
    path.write_text("bob\n")
    os.utime(path, ns=(1, 2 * 10**18))
    assert set(acl.current()) == {"alice", "bob"}
    assert acl.last_error is not None
    assert "line 1" in acl.last_error
    with pytest.raises(InputError, match="cannot read the ACL file"):
        auth.AclFile(tmp_path / "missing")


def test_credentials_from_the_environment(tmp_path: Path) -> None:
    assert auth.credentials_from_env({}) is None
    c = auth.credentials_from_env({"TREADLE_USER": "alice", "TREADLE_KEY": "k" * 16})
    assert c == auth.Credentials("alice", b"k" * 16)
    (tmp_path / "key").write_text("s" * 20 + "\n")
    c = auth.credentials_from_env({"TREADLE_USER": "a", "TREADLE_KEY_FILE": str(tmp_path / "key")})
    assert c is not None
    assert c.key == b"s" * 20
    with pytest.raises(InputError, match="TREADLE_KEY or TREADLE_KEY_FILE"):
        auth.credentials_from_env({"TREADLE_USER": "a"})


def test_a_container_signature_covers_its_grant() -> None:
    key = auth.container_key(b"n" * 20)

    def payload(res: dict[str, float], **over: object) -> bytes:
        terms: dict[str, object] = dict(max_duration_s=100.0, expires_s=50.0)
        terms.update(over)
        return auth.container_payload("c1", "app1", "n1", res, **terms)  # type: ignore[arg-type]

    sig = auth.sign(key, payload({"vcores": 1, "memory_mb": 1024}))
    assert auth.verify(key, payload({"memory_mb": 1024.0, "vcores": 1.0}), sig)
    changed = [
        payload({"vcores": 2, "memory_mb": 1024}),
        payload({"vcores": 1, "memory_mb": 1024}, max_duration_s=101.0),
        payload({"vcores": 1, "memory_mb": 1024}, expires_s=51.0),
        payload({"vcores": 1, "memory_mb": 1024}, command=["/bin/sh"]),
        payload({"vcores": 1, "memory_mb": 1024}, environment={"A": "1"}),
    ]
    assert not any(auth.verify(key, p, sig) for p in changed)


def test_a_secret_open_to_other_accounts_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "node-secret"
    secret.write_text("s" * 20)
    secret.chmod(0o600)
    auth.check_private(secret, "node secret")
    secret.chmod(0o640)
    with pytest.raises(
        InputError, match=r"the node secret is open to other accounts \(mode 0640\); chmod 600"
    ):
        auth.check_private(secret, "node secret")
