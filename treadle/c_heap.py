"""Handing the C heap's free pages back to the system, between the phases of a long run.

Arrays of a few tens of kilobytes (a row group's columns, say) come from glibc's heap, not
from their own mappings; when a phase frees millions of them, the pages stay in the process
among the few blocks still live, and the next phase grows the heap further instead of
reusing them. ``malloc_trim(0)`` returns every whole free page of the heap to the system
(``madvise``), so the next phase starts from what is live. Where the C library is not glibc
(musl, macOS, Windows) this does nothing. Arrow's own pool (mimalloc) keeps what Parquet
reads and writes free likewise; it is asked to give its free pages back too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


def release_free_heap() -> bool:
    """Return the free pages of Arrow's memory pool and of the C heap to the system; True
    when the C library could (glibc)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # mimalloc's or jemalloc's free pages
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
