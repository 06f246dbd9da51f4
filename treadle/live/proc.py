"""Shared start-up of the rm, nm and am processes: argument errors, port files, logging."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from treadle.errors import TreadleError
from treadle.live import auth, logs
from treadle.live.rpcutil import Peer, TlsFiles


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def write_port_file(path: str | None, address: str) -> None:
    """Publish the bound address atomically (a launcher polls for the file)."""
    if not path:
        return
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(address + "\n")
    os.replace(tmp, target)


def host_port(address: str, port: int) -> str:
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return f"{host}:{port}"


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="info", choices=logs.LEVELS, type=str.lower)
    parser.add_argument("--port-file", help="write the bound host:port here once serving")


def setup_logging(level: str, prog: str) -> None:
    try:
        logs.configure(level)
    except ValueError as e:
        fail(prog, str(e))


def add_security(parser: argparse.ArgumentParser, *, identity: bool) -> None:
    """TLS flags for every role; with ``identity``, the user a client process signs as
    (else taken from TREADLE_USER and TREADLE_KEY or TREADLE_KEY_FILE)."""
    g = parser.add_argument_group("security")
    g.add_argument("--tls-cert", metavar="PEM", help="this process's TLS certificate")
    g.add_argument("--tls-key", metavar="PEM", help="its private key")
    g.add_argument("--tls-ca", metavar="PEM", help="the CA that signs every role's certificate")
    if identity:
        g.add_argument("--user", help=f"sign calls as this user (or ${auth.ENV_USER})")
        g.add_argument("--key-file", help=f"that user's secret key (or ${auth.ENV_KEY_FILE})")


def security_from(prog: str, args: argparse.Namespace) -> Peer:
    """The process's identity and TLS from its flags and environment (a bad or partial
    setting exits with one line)."""
    files = (args.tls_cert, args.tls_key, args.tls_ca)
    tls = None
    if any(files):
        if not all(files):
            fail(prog, "--tls-cert, --tls-key and --tls-ca go together")
        tls = TlsFiles(args.tls_cert, args.tls_key, args.tls_ca)
        try:
            tls.read()
        except TreadleError as e:
            fail(prog, str(e))
    creds = None
    user = getattr(args, "user", None)
    try:
        if user:
            key_file = getattr(args, "key_file", None) or os.environ.get(auth.ENV_KEY_FILE)
            if not key_file:
                fail(prog, f"--user needs --key-file (or ${auth.ENV_KEY_FILE})")
            creds = auth.Credentials(user, auth.read_secret(key_file, f"key of {user!r}"))
        elif hasattr(args, "user"):
            creds = auth.credentials_from_env(os.environ)
    except TreadleError as e:
        fail(prog, str(e))
    return Peer(creds, tls)
