"""``treadle.c_heap.release_free_heap``: the free pages a phase leaves among live blocks go
back to the system (glibc), so the process's resident memory falls to what is live."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from treadle.c_heap import release_free_heap

CHILD = textwrap.dedent(
    """
    import numpy as np
    from treadle.c_heap import release_free_heap

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    # 160 MB of 32 KB arrays (heap blocks, not mappings), every 64th kept: the kept ones
    # pin the freed pages between them.
    blocks = [np.ones(4096) for _ in range(5000)]
    kept = blocks[::64]
    del blocks
    before = rss_mb()
    assert release_free_heap()
    print(before, rss_mb(), len(kept))
    """
)


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim"
)
def test_the_freed_pages_among_live_blocks_leave_the_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True
    ).stdout.split()
    before, after = float(out[0]), float(out[1])
    assert before - after > 100, (before, after)


def test_it_can_be_called_again_and_says_whether_it_could() -> None:
    first = release_free_heap()
    assert release_free_heap() is first
    assert first is (sys.platform == "linux" and platform.libc_ver()[0] == "glibc")
