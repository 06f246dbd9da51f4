"""structlog, configured once per process: JSON lines when stderr is not a terminal,
readable console lines when it is."""

from __future__ import annotations

import logging
import sys

_configured = False

LEVELS = ("debug", "info", "warning", "error")
"""The log levels every command and role process takes (``--log-level``)."""


def configure(level: str = "warning", *, json: bool | None = None) -> None:
    global _configured
    import structlog  # here, not at the top: the CLI lists LEVELS at startup

    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}")
    as_json = not sys.stderr.isatty() if json is None else json
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    _configured = True


def configure_once(level: str = "info") -> None:
    """``configure(level)`` unless this process configured its logs already: a command
    without ``--log-level`` (``treadle validate``, ``convert``) that reads a trace logs an
    importer's notes (what it left out) on stderr, never on stdout (structlog's own
    default), which stays the command's answer."""
    if not _configured:
        configure(level)
