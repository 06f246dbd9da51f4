"""Signing requests to a secured RM's HTTP port (``rm.server.http``), for Python clients:
``SignedAuth`` is a ``requests`` auth, so YARN's Python clients take it as they are, e.g.
``yarn_api_client.ResourceManager([url], auth=SignedAuth(creds))``."""

from __future__ import annotations

from typing import Any

import requests

from treadle.live import auth

HEADERS = ("X-Treadle-User", "X-Treadle-Ts", "X-Treadle-Sig")


def signed_headers(
    creds: auth.Credentials, verb: str, target: str, ts: int, body: bytes = b""
) -> dict[str, str]:
    """The headers of a request ``verb target`` (``target``: the path and query exactly as
    sent) with ``body``, signed by ``creds`` at ``ts`` (ns since the Unix epoch, fresh for
    the user)."""
    sig = auth.sign(creds.key, auth.canonical(f"{verb} {target}", creds.user, ts, body))
    return dict(zip(HEADERS, (creds.user, str(ts), sig), strict=True))


class SignedAuth(requests.auth.AuthBase):
    """Signs every request of a ``requests`` session as ``creds``."""

    def __init__(self, creds: auth.Credentials) -> None:
        self.creds = creds
        self._stamper = auth.Stamper()

    def __call__(self, r: Any) -> Any:
        body = r.body or b""
        if isinstance(body, str):
            body = body.encode()
        ts = self._stamper.next()
        r.headers.update(signed_headers(self.creds, r.method, r.path_url, ts, body))
        return r
