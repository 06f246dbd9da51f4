"""The RM process's memory, as glibc's allocator keeps it: a long-lived server whose large
submissions come and go must give their memory back once they end.

What a 1,000,000-task submission takes while it is decoded and kept (some 100 MB of
Python objects, the wire's bytes, the store's row) is freed when it ends
(``rm.core.ended``), but glibc keeps freed memory in the arena of the thread that took
it, and by default each thread (the event loop, gRPC's, the decoder's) gets an arena of
its own: the churn bench's RSS grew 1.6x over 20 submit-and-kill rounds. With two arenas
and the free memory handed back after each large application ends, it stays flat. Both
are no-ops where the C library is not glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

#: glibc's ``mallopt`` parameter: how many allocator arenas the threads share.
_M_ARENA_MAX = -8
#: An application of at least this many tasks gives its memory back when it ends.
LARGE_TASKS = 100_000


def _libc() -> Any:
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libc.so.6")
    return None


_LIBC = _libc()


def few_arenas(arenas: int = 2) -> None:
    """Have the process's threads share ``arenas`` glibc arenas (before any starts)."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(_M_ARENA_MAX, arenas)


def give_back() -> None:
    """Hand the allocator's free memory back to the system (glibc's ``malloc_trim``)."""
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
