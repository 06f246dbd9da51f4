"""The RM's gatekeeper: who is calling, and may they (treadle.live.auth does the crypto).

- **Users** (Client calls): the call's metadata names a user of the ACL file, a timestamp
  fresh for that user (``auth.ReplayWindow``) and the HMAC of the canonical request under
  the user's key. A ``user`` reads, kills and submits only as itself; an ``admin`` may do
  everything (submit as any user, read every application, its AM token and the event log).
  A call open to anyone (``Gate.anyone``: the DP price) may come unsigned; signed, it is
  checked all the same.
- **AMs**: a token per application, issued at submission, required on Register, Allocate
  and Finish for that application only.
- **NMs**: a registration signed under the cluster's node secret; the RM answers with a
  token per node, required on every heartbeat; re-registering a live node needs it.
- **Containers**: each grant is signed under a key derived from the node secret, over
  its whole launch context (``auth.container_payload``: an AM container's command and
  environment, none for a task; the longest duration a task may run; an expiry); the NMs
  check it before starting a container, and start each grant once (``ContainerVerifier``).

Every refusal raises ``auth.UnauthenticatedError`` (who is calling is not established) or
``auth.PermissionDeniedError`` (they may not) with one reason, before the call has any
effect. A gate without an ACL and node secret (``Gate.open()``) lets every call through.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from treadle.live import auth
from treadle.live.auth import PermissionDeniedError, UnauthenticatedError

Metadata = Iterable[tuple[str, str | bytes]]


@dataclass(frozen=True)
class Caller:
    user: str
    role: str

    @property
    def admin(self) -> bool:
        return self.role == "admin"


#: What an open gate answers for every caller.
ANYONE = Caller("", "admin")
#: Who an unsigned call to a method open to anyone is (``Gate.anyone``).
NOBODY = Caller("", "anonymous")


class Gate:
    def __init__(
        self,
        acl: auth.AclFile | None,
        node_secret: bytes | None,
        *,
        replay_window_s: float = 30.0,
        clock_skew_s: float = auth.MAX_SKEW_NS / 1e9,
    ) -> None:
        if (acl is None) != (node_secret is None):
            raise ValueError("a gate needs both an ACL and a node secret, or neither")
        self.acl = acl
        self.node_secret = node_secret
        window = int(replay_window_s * 1e9)
        self.replay = auth.ReplayWindow(window, time.time_ns() - window, int(clock_skew_s * 1e9))
        self._container_key = auth.container_key(node_secret) if node_secret else b""
        self.am_tokens: dict[str, str] = {}  # app id -> its AM token
        self.node_tokens: dict[str, str] = {}  # node id -> its token
        self._acl_error: str | None = None

    @classmethod
    def open(cls) -> Gate:
        return cls(None, None)

    @property
    def enabled(self) -> bool:
        return self.acl is not None

    @property
    def cluster_id(self) -> str:
        return cluster_id(self.node_secret)

    # ------------------------------------------------------------------ signed calls
    def _signed(self, method: str, body: bytes, metadata: Metadata) -> tuple[str, str]:
        """(user, signature) of a signed call whose timestamp is fresh; the key is looked
        up by the caller-specific part (``_key_of``)."""
        md = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in metadata}
        user, ts_text, sig = md.get(auth.USER_KEY), md.get(auth.TS_KEY), md.get(auth.SIG_KEY)
        if not user or not ts_text or not sig:
            raise UnauthenticatedError(
                f"no credentials: {method} needs the metadata {auth.USER_KEY}, "
                f"{auth.TS_KEY} and {auth.SIG_KEY} (a signed request)"
            )
        try:
            ts = int(ts_text)
        except ValueError:
            raise UnauthenticatedError(f"{auth.TS_KEY} is not an integer: {ts_text!r}") from None
        key = self._key_of(user)
        if not auth.verify(key, auth.canonical(method, user, ts, body), sig):
            raise UnauthenticatedError(f"bad signature for user {user!r} on {method}")
        stale = self.replay.check(user, ts, time.time_ns())
        if stale:
            raise UnauthenticatedError(f"user {user!r}: {stale}")
        return user, sig

    def _key_of(self, user: str) -> bytes:
        if user == auth.NODE_PRINCIPAL:
            assert self.node_secret is not None
            return self.node_secret
        assert self.acl is not None
        entries = self.acl.current()
        entry = entries.get(user)
        if entry is None:
            raise UnauthenticatedError(f"unknown user {user!r} (not in the ACL file)")
        return entry.key

    def client(self, method: str, body: bytes, metadata: Metadata) -> Caller:
        """The identity of a Client call (``method``: its full gRPC path)."""
        if not self.enabled:
            return ANYONE
        user, _ = self._signed(method, body, metadata)
        if user == auth.NODE_PRINCIPAL:
            raise PermissionDeniedError("the node secret does not make a user")
        assert self.acl is not None
        entry = self.acl.entries[user]  # present: _key_of found it
        return Caller(user, entry.role)

    def anyone(self, method: str, body: bytes, metadata: Metadata) -> Caller:
        """The identity of a call anyone may make (the DP price): an unsigned call is
        ``NOBODY``; a call carrying any credential is checked as ``client`` checks it, so a
        forged or replayed one is refused, never taken as anonymous."""
        md = tuple(metadata)
        if not self.enabled:
            return ANYONE
        if not any(k in (auth.USER_KEY, auth.TS_KEY, auth.SIG_KEY) for k, _ in md):
            return NOBODY
        return self.client(method, body, md)

    def acl_problem(self) -> str | None:
        """The error of the last failed ACL reload, once (the previous entries stay in force)."""
        if self.acl is None or self.acl.last_error == self._acl_error:
            return None
        self._acl_error = self.acl.last_error
        return self._acl_error

    # ------------------------------------------------------------------ authorization
    @staticmethod
    def may_act_for(caller: Caller, user: str, what: str) -> None:
        if not caller.admin and caller.user != user:
            raise PermissionDeniedError(
                f"user {caller.user!r} may not {what} of user {user!r} (only its own, or an admin)"
            )

    @staticmethod
    def may_use_queue(caller: Caller, queue: str, what: str) -> None:
        """A user acts on the queue named after it only (one leaf queue per user, as in
        Dynamic Priority); an admin on every queue."""
        if not caller.admin and (not caller.user or caller.user != queue):
            who = f"user {caller.user!r}" if caller.user else "an unsigned caller"
            raise PermissionDeniedError(
                f"{who} may not {what} of queue {queue!r} (a user only its own queue, "
                "the one named after it; or an admin)"
            )

    @staticmethod
    def admin_only(caller: Caller, what: str) -> None:
        if not caller.admin:
            raise PermissionDeniedError(f"user {caller.user!r} may not {what}: admin only")

    # ------------------------------------------------------------------ AMs
    def issue_am_token(self, app_id: str) -> str:
        if not self.enabled:
            return ""
        token = self.am_tokens[app_id] = auth.new_secret()
        return token

    def check_am(self, app_id: str, token: str, method: str) -> None:
        if not self.enabled:
            return
        if not _holds(self.am_tokens.get(app_id), token):
            raise UnauthenticatedError(
                f"{method} for {app_id} carries no AM token"
                if not token
                else f"{method}: not the AM token of {app_id}"
            )

    # ------------------------------------------------------------------ NMs
    def register_node(
        self, method: str, body: bytes, metadata: Metadata, node_id: str, token: str, live: bool
    ) -> str:
        """Check a node registration; return the node's token (kept when it presented its
        current one, else a new one)."""
        if not self.enabled:
            return ""
        user, _ = self._signed(method, body, metadata)
        if user != auth.NODE_PRINCIPAL:
            raise PermissionDeniedError(
                f"node {node_id!r}: a registration must be signed with the node secret"
            )
        current = self.node_tokens.get(node_id)
        held = _holds(current, token)
        if live and not held:
            raise PermissionDeniedError(
                f"node {node_id!r} is registered and alive; re-registering it needs its node token"
            )
        if held:
            assert current is not None
            return current
        token = self.node_tokens[node_id] = auth.new_secret()
        return token

    def check_heartbeat(self, node_id: str, token: str) -> None:
        if not self.enabled:
            return
        if not _holds(self.node_tokens.get(node_id), token):
            raise UnauthenticatedError(
                f"heartbeat of node {node_id!r} carries no node token"
                if not token
                else f"heartbeat of node {node_id!r}: not its node token"
            )

    # ------------------------------------------------------------------ containers
    def sign_container(
        self,
        container_id: str,
        app_id: str,
        node_id: str,
        resources: Mapping[str, float],
        *,
        max_duration_s: float,
        expires_s: float,
        command: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
    ) -> str:
        """The container token of a grant: the RM's signature of its whole launch context
        (``auth.container_payload``); a task grant names no command."""
        if not self.enabled:
            return ""
        payload = auth.container_payload(
            container_id,
            app_id,
            node_id,
            resources,
            max_duration_s=max_duration_s,
            expires_s=expires_s,
            command=command,
            environment=environment,
        )
        return auth.sign(self._container_key, payload)


class Grant(NamedTuple):
    """What an AM keeps of a container the RM granted it, to launch it with."""

    token: str
    max_duration_s: float
    expires_s: float


@dataclass(frozen=True)
class SignedLaunch:
    """A StartContainers launch as the NM checks it: the grant's terms and its token."""

    container_id: str
    app_id: str
    node_id: str
    resources: Mapping[str, float]
    duration_s: float
    max_duration_s: float
    expires_s: float
    command: tuple[str, ...]
    environment: Mapping[str, str]
    token: str

    def payload(self, *, with_context: bool = True) -> bytes:
        return auth.container_payload(
            self.container_id,
            self.app_id,
            self.node_id,
            self.resources,
            max_duration_s=self.max_duration_s,
            expires_s=self.expires_s,
            command=self.command if with_context else (),
            environment=self.environment if with_context else None,
        )


class ContainerVerifier:
    """An NM's check of the RM's container grants (None secret: accept every launch).

    A launch starts only with the RM's signature of exactly its terms (application, node,
    resources, command, environment, the longest duration and the expiry), for a duration
    within that bound, before the expiry, and once: a grant used is refused until it has
    expired (after which it is refused as expired)."""

    def __init__(self, node_secret: bytes | None) -> None:
        self._key = auth.container_key(node_secret) if node_secret else None
        self._used: dict[str, float] = {}  # container id -> its grant's expiry
        self._expiries: list[tuple[float, str]] = []  # a heap of the same, to forget them

    def check(self, launches: Sequence[SignedLaunch], now: float) -> None:
        """Refuse the whole request if one launch is not granted as asked; else mark
        every grant used."""
        if self._key is None:
            return
        seen: set[str] = set()
        for x in launches:
            self._check_one(x, now, seen)
            seen.add(x.container_id)
        for x in launches:
            self._used[x.container_id] = x.expires_s
            heapq.heappush(self._expiries, (x.expires_s, x.container_id))
        while self._expiries and self._expiries[0][0] < now:
            _, cid = heapq.heappop(self._expiries)
            self._used.pop(cid, None)

    def _check_one(self, x: SignedLaunch, now: float, seen: set[str]) -> None:
        assert self._key is not None
        cid = x.container_id
        if not x.token:
            raise UnauthenticatedError(f"container {cid} carries no container token")
        if not auth.verify(self._key, x.payload(), x.token):
            if x.command and auth.verify(self._key, x.payload(with_context=False), x.token):
                raise PermissionDeniedError(
                    f"container {cid}: a task container runs no command (its grant names none)"
                )
            raise UnauthenticatedError(
                f"container {cid}: bad container token (not signed by the RM for this "
                "application, node, resources, command, environment, duration and expiry)"
            )
        if cid in self._used or cid in seen:
            raise PermissionDeniedError(
                f"container {cid}: its grant was used already (a grant starts one container, once)"
            )
        if now > x.expires_s:
            raise UnauthenticatedError(
                f"container {cid}: its grant expired at {x.expires_s:.1f} (now {now:.1f}, "
                "emulated s)"
            )
        if not x.command and x.duration_s > x.max_duration_s:
            raise PermissionDeniedError(
                f"container {cid}: asks to run {x.duration_s:g} s; its grant allows at most "
                f"{x.max_duration_s:g} s"
            )


def cluster_id(node_secret: bytes | None) -> str:
    """Which cluster this is, as a state store's header names it: a digest of the node
    secret (which every role of one cluster shares); ``insecure`` without one."""
    if node_secret is None:
        return "insecure"
    return auth.derive_key(node_secret, "cluster-id").hex()[:16]


def _holds(issued: str | None, token: str) -> bool:
    """Whether ``token`` is the one issued (none issued: nothing is)."""
    return bool(token) and issued is not None and auth.same(issued, token)
