"""The cyclic garbage collector around a run (``treadle.study.heap``): a run leaves it as
it found it, reclaims its cycles in a process that goes on, and freezes what it made only
in a process that ends with it."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload


def test_a_run_leaves_the_collector_as_it_was_and_its_cycles_reclaimable(
    tmp_path: Path,
) -> None:
    wl = load_workload("tiny")
    before = gc.get_threshold()
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    run_sim(wl, PolicyChoice("fifo", {}), tmp_path, options=RunOptions(slowdown=False))
    assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen  # nothing pinned: the next collection reclaims
    gc.disable()
    try:
        run_sim(wl, PolicyChoice("fifo", {}), tmp_path, options=RunOptions(slowdown=False))
        assert not gc.isenabled()  # paused before: still paused
    finally:
        gc.enable()


def test_a_process_that_ends_with_its_run_freezes_what_the_run_made(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import gc
        from pathlib import Path
        from treadle.study import heap
        from treadle.study.runner import PolicyChoice, RunOptions, run_sim
        from treadle.workload import load_workload

        heap.ends_with_run()
        wl = load_workload("tiny")
        run_sim(wl, PolicyChoice("fifo", {{}}), Path({str(tmp_path)!r}),
                options=RunOptions(slowdown=False))
        print(gc.isenabled(), gc.get_freeze_count() > 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["True", "True"]
