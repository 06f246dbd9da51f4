"""``treadle cluster add-user``: a user's key beside the ACL and its line in the ACL, all
or nothing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from treadle.cluster.secrets import ACL_FILE, ClusterSecrets, add_user
from treadle.errors import InputError
from treadle.live.auth import AclFile


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    d = tmp_path / "secrets"
    ClusterSecrets.generate().write(d)
    return d


def test_the_user_gets_a_private_key_that_the_reloaded_acl_accepts(secrets_dir: Path) -> None:
    acl = AclFile(secrets_dir / ACL_FILE)
    assert "alice" not in acl.current()
    key_path, stale = add_user(secrets_dir, "alice")
    assert (key_path, stale) == (secrets_dir / "alice.key", False)
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


def test_a_stale_key_file_in_a_reused_directory_is_replaced(tmp_path: Path) -> None:
    """A cluster started again in the same directory has fresh secrets and an ACL without
    the old cluster's users; their key files are left behind. Adding the user again
    replaces its stale key (mode 0600, written whole), and the new key is the one the
    ACL accepts."""
    d = tmp_path / "secrets"
    ClusterSecrets.generate().write(d)
    add_user(d, "carol")
    ClusterSecrets.generate().write(d)  # `cluster up` again in the same --dir
    stale = (d / "carol.key").read_text()
    (d / "carol.key").chmod(0o644)
    key_path, replaced = add_user(d, "carol")
    assert replaced
    assert key_path.read_text() != stale
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    entry = AclFile(d / ACL_FILE).current()["carol"]
    assert entry.key == key_path.read_text().strip().encode()
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [*ClusterSecrets.generate().files(), "carol.key"]
    )


def test_a_symlink_in_place_of_the_key_is_replaced_not_followed(secrets_dir: Path) -> None:
    target = secrets_dir.parent / "elsewhere"
    target.write_text("not a key\n")
    (secrets_dir / "dave.key").symlink_to(target)
    key_path, replaced = add_user(secrets_dir, "dave")
    assert replaced
    assert not key_path.is_symlink()
    assert target.read_text() == "not a key\n"


def test_the_command_adds_a_user_again_after_the_cluster_is_made_again(tmp_path: Path) -> None:
    """`treadle cluster add-user` on a reused --dir: exit 0, the key's path on stdout, one
    line on stderr saying the stale key was replaced."""
    import json

    from typer.testing import CliRunner

    from treadle.cli import app

    d = tmp_path / "cluster"
    secrets = d / "secrets"
    state = {"processes": [], "secrets": str(secrets)}
    for _ in range(2):  # up, add-user, down; up again in the same directory
        ClusterSecrets.generate().write(secrets)
        (d / "cluster.json").write_text(json.dumps(state))
        res = CliRunner().invoke(app, ["cluster", "add-user", "erin", "--dir", str(d)])
        assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(secrets / "erin.key")
    assert "replaced a stale key file" in res.stderr
    assert AclFile(secrets / ACL_FILE).current()["erin"].key == (
        (secrets / "erin.key").read_text().strip().encode()
    )
