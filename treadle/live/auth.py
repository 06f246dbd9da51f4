"""Identity, as pure functions: signed requests, the replay window, the ACL file, tokens.

Modelled on the DP paper's signed requests (docs: security.md) and YARN's
tokens. A caller signs the canonical form of a call, ``method\\nuser\\ntimestamp\\n
sha256(request bytes)``, with HMAC-SHA256 under its secret key; the user, the timestamp
(integer nanoseconds since the Unix epoch) and the base64 signature travel in gRPC
metadata (``USER_KEY``, ``TS_KEY``, ``SIG_KEY``). The ACL file holds one ``user role key``
line per user (roles ``user`` and ``admin``; ``#`` starts a comment). NodeManagers sign
their registration the same way as the principal ``NODE_PRINCIPAL`` under the cluster's
node secret, and the RM signs each container it grants under a key derived from it.
No sockets here: the RM's gate (``rm.gate``) and the channels (``treadle.live.rpcutil``)
use these.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from treadle.errors import (
    InputError,
    PermissionDeniedError as PermissionDeniedError,  # its home is errors
    TreadleError,
)

USER_KEY = "x-treadle-user"
TS_KEY = "x-treadle-ts"
SIG_KEY = "x-treadle-sig"

ROLES = ("user", "admin")
NODE_PRINCIPAL = "nodemanager"  # who signs a node registration (key: the node secret)
#: Environment variables a client process takes its identity from.
ENV_USER, ENV_KEY, ENV_KEY_FILE = "TREADLE_USER", "TREADLE_KEY", "TREADLE_KEY_FILE"
ENV_AM_TOKEN = "TREADLE_AM_TOKEN"  # a managed AM's token, set by the NM that starts it


class UnauthenticatedError(TreadleError):
    """The caller could not be identified (no, bad or replayed credentials): UNAUTHENTICATED."""


@dataclass(frozen=True)
class Credentials:
    """Who a client process is: a user name and its secret key."""

    user: str
    key: bytes = field(repr=False)


def new_secret() -> str:
    """A fresh random secret (a key, a node secret, a token): 32 bytes, URL-safe text."""
    return secrets.token_urlsafe(32)


def canonical(method: str, user: str, ts: int, body: bytes) -> bytes:
    return f"{method}\n{user}\n{ts}\n{hashlib.sha256(body).hexdigest()}".encode()


def sign(key: bytes, data: bytes) -> str:
    return base64.b64encode(hmac.new(key, data, hashlib.sha256).digest()).decode()


def verify(key: bytes, data: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, data), signature)


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two tokens."""
    return hmac.compare_digest(a.encode(), b.encode())


def derive_key(secret: bytes, purpose: str) -> bytes:
    """A key for one purpose derived from a shared secret (e.g. container signing)."""
    return hmac.new(secret, f"treadle/{purpose}".encode(), hashlib.sha256).digest()


class Stamper:
    """Timestamps for one process's signed calls: wall-clock nanoseconds, strictly
    increasing even when the clock stands still or steps back."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last = max(time.time_ns(), self._last + 1)
        return self._last


def signed_metadata(
    creds: Credentials, method: str, body: bytes, ts: int
) -> tuple[tuple[str, str], ...]:
    sig = sign(creds.key, canonical(method, creds.user, ts, body))
    return ((USER_KEY, creds.user), (TS_KEY, str(ts)), (SIG_KEY, sig))


MAX_SKEW_NS = 300 * 10**9
"""How far ahead of the server's clock a signed timestamp may be (``ReplayWindow``)."""


class ReplayWindow:
    """Refuses a timestamp it has accepted before, for each user.

    The rule: a user's timestamps strictly increase, except that calls sent concurrently
    (one process's parallel calls, or two processes of one user) may arrive out of order
    by at most ``window_ns``: a timestamp is accepted when it is newer than the user's
    newest, or within the window below it and not seen yet. Nothing older than the
    window (nor older than ``floor_ns``, the server's start) is ever accepted, so every
    accepted timestamp is accepted once.

    A timestamp more than ``max_skew_ns`` ahead of the server's clock (``now_ns``) is
    refused and changes nothing: were it taken, it would become the user's newest, and
    every call the user signs until its clock catches up would be refused as older (one
    call an hour ahead would lock the user out for the hour). The default, 300 s, is
    Kerberos' clock skew (``clockskew`` in krb5.conf).

    Across a restart of the server: ``restore`` takes each user's newest timestamp as
    kept by ``on_accept`` (called with every new newest before the request is let
    through), and nothing at or below it is accepted again (a request in flight across
    the restart is refused: its client signs a new one).
    """

    def __init__(self, window_ns: int, floor_ns: int = 0, max_skew_ns: int = MAX_SKEW_NS) -> None:
        self.window_ns = window_ns
        self.floor_ns = floor_ns
        self.max_skew_ns = max_skew_ns
        self.on_accept: Callable[[str, int], None] | None = None
        self._floors: dict[str, int] = {}  # per user, from a previous run (``restore``)
        self._newest: dict[str, int] = {}
        # Per user, the timestamps accepted inside the window: a set to look up, a heap to
        # drop the ones the window has left behind (oldest first).
        self._seen: dict[str, set[int]] = {}
        self._order: dict[str, list[int]] = {}

    def check(self, user: str, ts: int, now_ns: int) -> str | None:
        """None if ``ts`` is fresh for ``user`` at ``now_ns`` (and record it), else why not."""
        if ts - now_ns > self.max_skew_ns:
            return (
                f"timestamp {ts} is {(ts - now_ns) / 1e9:.0f} s ahead of the RM's clock, more "
                f"than the clock skew allowed ({self.max_skew_ns / 1e9:g} s); set the "
                "client's clock right"
            )
        floor = max(self.floor_ns, self._floors.get(user, 0))
        newest = self._newest.get(user, floor)
        seen = self._seen.setdefault(user, set())
        order = self._order.setdefault(user, [])
        if ts > newest:
            if self.on_accept is not None:
                self.on_accept(user, ts)  # kept before anything is done
            self._newest[user] = ts
            low = ts - self.window_ns
            while order and order[0] <= low:
                seen.discard(heapq.heappop(order))
        elif ts <= newest - self.window_ns or ts <= floor:
            return f"timestamp {ts} is older than the replay window (newest {newest})"
        elif ts in seen:
            return f"timestamp {ts} was already used (replayed request)"
        seen.add(ts)
        heapq.heappush(order, ts)
        return None

    def restore(self, newest: Mapping[str, int]) -> None:
        """Each user's newest timestamp accepted by a previous run: none at or below it
        is accepted again."""
        self._floors.update(newest)


# ---------------------------------------------------------------------- the ACL file
@dataclass(frozen=True)
class AclEntry:
    user: str
    role: str
    key: bytes = field(repr=False)


def parse_acl(text: str, source: str) -> dict[str, AclEntry]:
    """``user role key`` lines (``#`` comments, blank lines ignored); a bad line is an
    InputError naming the file and the line."""
    out: dict[str, AclEntry] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"line {n}"
        if len(parts) != 3:
            raise InputError(source, where, f"expected 'user role key', got {len(parts)} fields")
        user, role, key = parts
        if role not in ROLES:
            raise InputError(source, where, f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if len(key) < 16:
            raise InputError(source, where, f"the key of {user!r} is shorter than 16 characters")
        if user in out:
            raise InputError(source, where, f"user {user!r} is listed twice")
        if user == NODE_PRINCIPAL:
            raise InputError(source, where, f"{NODE_PRINCIPAL!r} is reserved for NodeManagers")
        out[user] = AclEntry(user, role, key.encode())
    return out


def acl_text(entries: Mapping[str, tuple[str, str]]) -> str:
    """An ACL file's text: user -> (role, key)."""
    lines = ["# treadle ACL: user role key (roles: user, admin)"]
    lines += [f"{u} {role} {key}" for u, (role, key) in entries.items()]
    return "\n".join(lines) + "\n"


class AclFile:
    """An ACL file, reloaded when its modification time or size changes. A reload that
    fails keeps the entries in force and reports the error once (``last_error``)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self.entries: dict[str, AclEntry] = {}
        self.last_error: str | None = None
        self.entries = self._read()  # a bad file at start is an error

    def _read(self) -> dict[str, AclEntry]:
        try:
            st = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(str(self.path), None, f"cannot read the ACL file: {e}") from None
        entries = parse_acl(text, str(self.path))
        self._stamp = (st.st_mtime_ns, st.st_size)
        return entries

    def current(self) -> dict[str, AclEntry]:
        """The entries in force, reloaded first if the file changed; returns the error of
        a failed reload through ``last_error`` (None once a reload succeeds)."""
        try:
            st = os.stat(self.path)
        except OSError as e:
            self.last_error = f"{self.path}: cannot read the ACL file: {e}"
            return self.entries
        if (st.st_mtime_ns, st.st_size) != self._stamp:
            try:
                self.entries = self._read()
                self.last_error = None
            except InputError as e:
                self._stamp = (st.st_mtime_ns, st.st_size)  # report a bad version once
                self.last_error = str(e)
        return self.entries


def read_secret(path: Path | str, what: str) -> bytes:
    """A secret from a file (surrounding whitespace stripped); an InputError if missing,
    unreadable or shorter than 16 characters."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise InputError(str(path), None, f"cannot read the {what}: {e}") from None
    if len(text) < 16:
        raise InputError(str(path), None, f"the {what} is shorter than 16 characters")
    return text.encode()


def check_private(path: Path | str, what: str) -> None:
    """Refuse a file of ours that other accounts may read or write (as ssh refuses a loose
    key): an InputError naming the file, its mode and the fix. A file another account owns
    (a Docker secret) is that account's to protect."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(str(path), None, f"cannot read the {what}: {e}") from None
    loose = st.st_mode & 0o077
    if loose and st.st_uid == os.geteuid():
        raise InputError(
            str(path),
            None,
            f"the {what} is open to other accounts (mode {st.st_mode & 0o777:04o}); "
            f"chmod 600 {path}",
        )


def credentials_from_env(env: Mapping[str, str]) -> Credentials | None:
    """``TREADLE_USER`` with ``TREADLE_KEY`` or ``TREADLE_KEY_FILE``; None when unset."""
    user = env.get(ENV_USER, "").strip()
    if not user:
        return None
    if env.get(ENV_KEY):
        return Credentials(user, env[ENV_KEY].strip().encode())
    if env.get(ENV_KEY_FILE):
        return Credentials(user, read_secret(env[ENV_KEY_FILE], f"key of {user!r}"))
    raise InputError(ENV_USER, None, f"{ENV_KEY} or {ENV_KEY_FILE} must be set with it")


# ---------------------------------------------------------------------- container tokens
def container_payload(
    container_id: str,
    app_id: str,
    node_id: str,
    resources: Mapping[str, float],
    *,
    max_duration_s: float,
    expires_s: float,
    command: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
) -> bytes:
    """What the RM signs of a container grant: the whole launch context but the task's
    own duration (bounded by ``max_duration_s``); the command and environment by digest."""
    amounts = ",".join(f"{k}={float(v)!r}" for k, v in sorted(resources.items()))
    context = json.dumps([list(command), sorted((environment or {}).items())])
    digest = hashlib.sha256(context.encode()).hexdigest()
    return (
        f"container-launch\n{container_id}\n{app_id}\n{node_id}\n{amounts}\n"
        f"{float(max_duration_s)!r}\n{float(expires_s)!r}\n{digest}"
    ).encode()


def container_key(node_secret: bytes) -> bytes:
    return derive_key(node_secret, "container-tokens")
