"""Shared start-up of the rm, nm and am processes: argument errors, port files, logging."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from treadle.live import logs


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
