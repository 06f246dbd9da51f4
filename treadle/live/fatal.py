"""A write a process cannot make ends it: fail fast on I/O errors (issue 26, item 4).

A disk full, a file size limit or a read-only file system do not go away by themselves:
an RM that kept serving after a failed write of its state store or event log would
answer every call with an error while staying up, so its supervisor would never act and
what it acknowledged would no longer survive a restart. So the first such error is
noted here (``note``, from the RPC error mapping and the RM's background loops), the
process's stop callbacks run, and its main loop exits with ``EX_IOERR`` and one line
naming the file and the error (``line``). Other errors keep their status codes.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable

#: sysexits.h's EX_IOERR: the exit status of a process stopped by a failed write.
EX_IOERR = 74
#: The errors of a write that retrying will not make: no space, a size limit (EFBIG,
#: RLIMIT_FSIZE), a quota, a read-only file system, the device failing.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO})


class FatalWrite:
    """The first write error of the process (None: none yet) and who to tell."""

    def __init__(self) -> None:
        self.error: OSError | None = None
        self.at = 0.0  # unix time of the error
        self._on_fatal: list[Callable[[], None]] = []
        #: Whether a main loop watches (``on_fatal``): else a write error keeps its status.
        self.armed = False

    def on_fatal(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once) when a write error is noted (at once if one was)."""
        self.armed = True
        if self.error is not None:
            callback()
        else:
            self._on_fatal.append(callback)

    def note(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a write error that ends the process; the first is kept and
        the callbacks run. Nothing is logged here: the log file may be the full one."""
        if not self.armed or not isinstance(exc, OSError) or exc.errno not in WRITE_ERRNOS:
            return False
        if self.error is None:
            self.error, self.at = exc, time.time()
            callbacks, self._on_fatal = self._on_fatal, []
            for callback in callbacks:
                callback()
        return True

    def line(self, prog: str) -> str:
        """The one line the process ends with."""
        e = self.error
        if e is None:
            return f"{prog}: no write failed"
        where = f" {e.filename}" if e.filename else ""
        name = errno.errorcode.get(e.errno or 0, str(e.errno))
        return (
            f"{prog}: error: cannot write{where}: {name}: {e.strerror or e}; "
            f"stopping (exit {EX_IOERR}) so that its supervisor or operator acts"
        )

    def reset(self) -> None:
        """Forget the error and the callbacks (tests that serve in-process)."""
        self.error = None
        self._on_fatal = []
        self.armed = False


#: The process's one record.
PROCESS = FatalWrite()
