"""A cluster's secrets, made fresh for every cluster treadle starts (no manual step).

Each cluster gets an ACL with two admins, ``treadle`` (the driver and the CLI on this
machine) and ``am-host`` (the unmanaged-AM host), and a node secret for its NMs. Local
clusters keep them in ``WORKDIR/secrets/`` (mode 0600) and record the directory in
``cluster.json``, so ``treadle run --rm ADDR`` and ``treadle cluster status`` on this
machine find the driver's key; containers get them copied in.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from treadle.cluster.procs import read_state
from treadle.errors import InputError, TreadleError
from treadle.live import auth
from treadle.live.rpcutil import Peer, TlsFiles

DRIVER_USER = "treadle"
AM_HOST_USER = "am-host"
ACL_FILE, NODE_SECRET_FILE = "acl", "node-secret"
DRIVER_KEY_FILE, AM_HOST_KEY_FILE = "treadle.key", "am-host.key"


@dataclass(frozen=True)
class ClusterSecrets:
    driver_key: str
    am_host_key: str
    node_secret: str

    @classmethod
    def generate(cls) -> ClusterSecrets:
        return cls(auth.new_secret(), auth.new_secret(), auth.new_secret())

    @property
    def acl_text(self) -> str:
        return auth.acl_text(
            {DRIVER_USER: ("admin", self.driver_key), AM_HOST_USER: ("admin", self.am_host_key)}
        )

    @property
    def driver(self) -> auth.Credentials:
        return auth.Credentials(DRIVER_USER, self.driver_key.encode())

    def files(self) -> dict[str, str]:
        """File name -> content, for a role's secrets directory."""
        return {
            ACL_FILE: self.acl_text,
            NODE_SECRET_FILE: self.node_secret + "\n",
            DRIVER_KEY_FILE: self.driver_key + "\n",
            AM_HOST_KEY_FILE: self.am_host_key + "\n",
        }

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            directory.chmod(0o700)
        for name, text in self.files().items():
            path = directory / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)


def recorded_peer(state: dict[str, Any]) -> Peer | None:
    """The driver's identity (and TLS) recorded in a local cluster's state file, if any."""
    secrets_dir = state.get("secrets")
    if not secrets_dir:
        return None
    try:
        key = auth.read_secret(Path(secrets_dir) / DRIVER_KEY_FILE, "driver key")
    except Exception:
        return None
    tls = state.get("tls")
    files = TlsFiles(*tls) if isinstance(tls, list) and len(tls) == 3 else None
    return Peer(auth.Credentials(DRIVER_USER, key), files)


def client_peer(
    rm: str,
    *,
    user: str | None,
    key_file: str | None,
    tls: TlsFiles | None,
    cluster_dir: Path,
    env: Mapping[str, str],
) -> Peer:
    """Who a CLI command (``treadle run``, ``cluster status``) calls the RM at ``rm`` as:
    ``--user``/``--key-file``, else ``TREADLE_USER`` and ``TREADLE_KEY[_FILE]``, else the
    driver of the local cluster recorded in ``cluster_dir`` if it is that RM, else nobody
    (an RM started with --insecure)."""
    if user:
        path = key_file or env.get(auth.ENV_KEY_FILE)
        if not path:
            raise InputError("--user", None, f"needs --key-file (or ${auth.ENV_KEY_FILE})")
        return Peer(auth.Credentials(user, auth.read_secret(path, f"key of {user!r}")), tls)
    creds = auth.credentials_from_env(env)
    if creds is not None:
        return Peer(creds, tls)
    with contextlib.suppress(TreadleError):
        state = read_state(cluster_dir)
        if state is not None and state.get("rm") == rm:
            found = recorded_peer(state)
            if found is not None:
                return Peer(found.creds, tls or found.tls)
    return Peer(None, tls)


#: Environment variables a deployment may set a secret with (value, or ``*_FILE``: a
#: file holding it, such as a Docker secret under /run/secrets); unset: made fresh.
SECRET_ENV = {
    "node_secret": "TREADLE_NODE_SECRET",
    "driver_key": "TREADLE_ADMIN_KEY",
    "am_host_key": "TREADLE_AM_HOST_KEY",
}


def secrets_from_env(env: Mapping[str, str]) -> ClusterSecrets:
    """The cluster's secrets from ``SECRET_ENV`` (values or ``*_FILE`` paths), each one
    not given made fresh; a given one shorter than 16 characters is an error."""
    values: dict[str, str] = {}
    for field_, var in SECRET_ENV.items():
        if env.get(var):
            value = env[var].strip()
            if len(value) < 16:
                raise InputError(var, None, "a secret needs at least 16 characters")
        elif env.get(var + "_FILE"):
            value = auth.read_secret(env[var + "_FILE"], var).decode()
        else:
            value = auth.new_secret()
        values[field_] = value
    return ClusterSecrets(**values)


def write_if_missing(directory: Path, env: Mapping[str, str]) -> bool:
    """Write a deployment's secrets into ``directory`` unless they are there already
    (a restarted RM keeps them); each file appears whole (written aside, then renamed).
    True if they were written."""
    if all((directory / name).exists() for name in ClusterSecrets.generate().files()):
        return False
    secrets = secrets_from_env(env)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / ".new"
    secrets.write(tmp)
    for name in secrets.files():
        os.replace(tmp / name, directory / name)
    tmp.rmdir()
    return True


#: A user an ACL line and a key file can both be named after.
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class NewKey(NamedTuple):
    """What ``add_user`` wrote: the key file, and whether it replaced a stale one."""

    path: Path
    replaced_stale: bool


def add_user(directory: Path, user: str, role: str = "user") -> NewKey:
    """Give ``user`` a fresh key in a cluster's secrets ``directory``: ``USER.key``
    (mode 0600) beside the ACL, and a ``user role key`` line in the ACL, which the RM
    reloads on its next call. Each file is replaced whole (written aside, then renamed),
    so the RM never reads half a file. A key file of a user the ACL does not list is
    stale (an earlier cluster's in a reused directory, or one whose ACL line was never
    written): its key opens nothing here, so it is replaced. A user already listed, a
    reserved name, a name that cannot be a file name, or a role other than
    ``user``/``admin`` is refused and nothing is written."""
    if not USER_NAME.fullmatch(user):
        raise InputError(
            "USER", None, f"{user!r}: a user name is 1-64 letters, digits, '.', '_', '@' or '-'"
        )
    if user in (auth.NODE_PRINCIPAL, DRIVER_USER, AM_HOST_USER):
        raise InputError("USER", None, f"{user!r} is reserved for the cluster's own roles")
    if role not in auth.ROLES:
        raise InputError("--role", None, f"must be one of {', '.join(auth.ROLES)}, got {role!r}")
    acl_path = directory / ACL_FILE
    try:
        text = acl_path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(str(acl_path), None, f"cannot read the ACL file: {e}") from None
    if user in auth.parse_acl(text, str(acl_path)):
        raise InputError(str(acl_path), None, f"user {user!r} is listed already")
    key = auth.new_secret()
    key_path = directory / f"{user}.key"
    stale = key_path.is_symlink() or key_path.exists()
    _replace_private(key_path, key + "\n")
    head = text if text.endswith("\n") or not text else text + "\n"
    _replace_private(acl_path, f"{head}{user} {role} {key}\n")
    return NewKey(key_path, stale)


def _replace_private(path: Path, text: str) -> None:
    """Write ``path`` whole, mode 0600: aside, then renamed over it (a symlink there is
    replaced, never followed)."""
    tmp = path.with_name(f".{path.name}.new")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def cluster_secrets_dir(cluster_dir: Path) -> Path:
    """The secrets directory of the local cluster recorded in ``cluster_dir``."""
    state = read_state(cluster_dir)
    if state is None:
        raise InputError("--dir", None, f"no cluster is recorded in {cluster_dir}")
    secrets_dir = state.get("secrets")
    if not secrets_dir:
        raise InputError("--dir", None, f"the cluster in {cluster_dir} keeps no secrets")
    return Path(secrets_dir)
