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
- **Containers**: each granted container is signed under a key derived from the node
  secret; the NMs check the signature before starting it.

Every refusal raises ``auth.UnauthenticatedError`` (who is calling is not established) or
``auth.PermissionDeniedError`` (they may not) with one reason, before the call has any
effect. A gate without an ACL and node secret (``Gate.open()``) lets every call through.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    ) -> None:
        if (acl is None) != (node_secret is None):
            raise ValueError("a gate needs both an ACL and a node secret, or neither")
        self.acl = acl
        self.node_secret = node_secret
        window = int(replay_window_s * 1e9)
        self.replay = auth.ReplayWindow(window, time.time_ns() - window)
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
        stale = self.replay.check(user, ts)
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
        self, container_id: str, app_id: str, node_id: str, resources: Mapping[str, float]
    ) -> str:
        if not self.enabled:
            return ""
        payload = auth.container_payload(container_id, app_id, node_id, resources)
        return auth.sign(self._container_key, payload)


class ContainerVerifier:
    """An NM's check of the RM's container signatures (None secret: accept every launch)."""

    def __init__(self, node_secret: bytes | None) -> None:
        self._key = auth.container_key(node_secret) if node_secret else None

    def check(
        self,
        container_id: str,
        app_id: str,
        node_id: str,
        resources: Mapping[str, float],
        token: str,
    ) -> None:
        if self._key is None:
            return
        if not token:
            raise UnauthenticatedError(f"container {container_id} carries no container token")
        payload = auth.container_payload(container_id, app_id, node_id, resources)
        if not auth.verify(self._key, payload, token):
            raise UnauthenticatedError(
                f"container {container_id}: bad container token (not signed by the RM "
                "for this application, node and resources)"
            )


def _holds(issued: str | None, token: str) -> bool:
    """Whether ``token`` is the one issued (none issued: nothing is)."""
    return bool(token) and issued is not None and auth.same(issued, token)
