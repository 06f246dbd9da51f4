"""``treadle cluster add-user``: a user's key beside the ACL and its line in the ACL, all
or nothing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from treadle.cluster.secrets import ACL_FILE, ClusterSecrets, add_user
from treadle.errors import InputError
from treadle.live.auth import AclFile, parse_acl


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    d = tmp_path / "secrets"
    ClusterSecrets.generate().write(d)
    return d


def test_the_user_gets_a_private_key_that_the_reloaded_acl_accepts(secrets_dir: Path) -> None:
    acl = AclFile(secrets_dir / ACL_FILE)
    assert "alice" not in acl.current()
    key_path = add_user(secrets_dir, "alice")
    assert key_path == secrets_dir / "alice.key"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    entry = acl.current()["alice"]  # the RM's reload sees the new line
    assert (entry.role, entry.key) == ("user", key_path.read_text().strip().encode())
    assert {"treadle", "am-host"} <= set(acl.current())  # the admins stay
    add_user(secrets_dir, "ops@example", role="admin")
    assert acl.current()["ops@example"].role == "admin"


@pytest.mark.parametrize(
    ("user", "role", "message"),
    [
        ("alice", "user", "listed already"),
        ("treadle", "user", "reserved"),
        ("nodemanager", "user", "reserved"),
        ("a b", "user", "a user name is"),
        ("../x", "user", "a user name is"),
        ("", "user", "a user name is"),
        ("bob", "root", "must be one of user, admin"),
    ],
)
def test_a_bad_request_writes_nothing(
    secrets_dir: Path, user: str, role: str, message: str
) -> None:
    add_user(secrets_dir, "alice")
    before = {p.name: p.read_bytes() for p in secrets_dir.iterdir()}
    with pytest.raises(InputError, match=message):
        add_user(secrets_dir, user, role)
    assert {p.name: p.read_bytes() for p in secrets_dir.iterdir()} == before


def test_a_stray_key_file_is_not_overwritten(secrets_dir: Path) -> None:
    (secrets_dir / "carol.key").write_text("mine\n")
    acl_before = (secrets_dir / ACL_FILE).read_text()
    with pytest.raises(InputError, match="exists already"):
        add_user(secrets_dir, "carol")
    assert (secrets_dir / "carol.key").read_text() == "mine\n"
    assert (secrets_dir / ACL_FILE).read_text() == acl_before
    assert "carol" not in parse_acl(acl_before, "acl")
