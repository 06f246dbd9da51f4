"""Errors shared by every layer.

Expected outcomes (an ask that does not fit, a node with no room) are values, not
exceptions. These are for input that is wrong: each carries where it came from so the CLI
can print one clear line and the gRPC servicers can map it to a status code in one place.
"""

from __future__ import annotations


class TreadleError(Exception):
    """Base class: a problem a user can fix, printed as one line without a traceback."""


class InputError(TreadleError):
    """Bad input from outside: a workload file, a trace, an argument or a parameter.

    ``source`` names the file (or the argument); ``field`` is a dotted path inside it.
    """

    def __init__(self, source: str, field: str | None, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


class WorkloadError(InputError):
    """A workload file or trace is invalid."""


class PluginError(TreadleError):
    """A plugin cannot be found, loaded or built (bad parameters included)."""


class NotFoundError(TreadleError):
    """A request names an application, node or container the RM does not know."""


class InvalidRequestError(TreadleError):
    """A request is malformed or impossible (negative resources, an ask larger than any node)."""


class LimitExceededError(TreadleError):
    """A request exceeds one of the RM's configured limits (RESOURCE_EXHAUSTED)."""


class PermissionDeniedError(TreadleError):
    """The caller is known but may not do this (a queue's ACL, another user's application):
    PERMISSION_DENIED."""


class ConflictError(TreadleError):
    """A request conflicts with current state (finished application, duplicate registration)."""


class SimulationStalledError(TreadleError):
    """The simulation can make no more progress but jobs remain unfinished."""
