"""Runs of a comparison in local worker processes, several at once (``treadle compare
--workers N``).

Each run goes to a process of its own, at most ``workers`` at once, in the order given;
the worker writes the run's files itself and sends back only what the report needs (the
backend's result and ``RunMetrics``), its progress (at most every
``PROGRESS_INTERVAL_S``) or its error, through one queue. A process per run, rather than a
pool, names the run whose process died (its exit code) instead of breaking every pending
run at once.

Start method: ``fork`` on Linux when this process runs one thread (the workers start at
once with everything already imported and the plugins already looked up); otherwise
``forkserver`` (where the platform has it, else ``spawn``): a plain fork while other threads
run (a progress bar's refresh thread, a queue's feeder) copies their locks in whatever
state they are, and the forkserver is a fresh interpreter that imports the simulator once
and forks each worker from that clean state.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from treadle import metrics
from treadle.errors import TreadleError
from treadle.model import Workload
from treadle.sim import ProgressFn
from treadle.study import heap
from treadle.study.runner import PolicyChoice, RunOptions

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.1  # a worker reports progress at most this often (and at the end)
_PRELOAD = ["treadle.study.parallel", "treadle.study.runner"]

#: What a run gives back: the backend's result (a small dataclass) and its metrics.
Outcome = tuple[Any, metrics.RunMetrics]


class Runner(Protocol):
    """What runs one policy (``treadle.study.compare.Backend``)."""

    def run(
        self,
        workload: Workload,
        choice: PolicyChoice,
        options: RunOptions,
        alone: dict[str, float],
        progress: ProgressFn | None,
        run_dir: Path,
    ) -> Outcome:
        """Run one policy and write its files under ``run_dir``."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def mp_context() -> Any:
    """The start method for worker processes (see the module's docstring)."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return mp.get_context("fork")
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def start_forkserver(ctx: Any) -> None:
    """Start the forkserver now (it imports treadle while this process does other work)."""
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def throttled(send: Callable[[int, int, float], None]) -> ProgressFn:
    """A progress callback that calls ``send`` at most every ``PROGRESS_INTERVAL_S`` (and
    always for the last job)."""
    last = 0.0

    def progress(done: int, total: int, t: float) -> None:
        nonlocal last
        now = time.monotonic()
        if done >= total or now - last >= PROGRESS_INTERVAL_S:
            last = now
            send(done, total, t)

    return progress


def _worker(
    index: int,
    runner: Runner,
    workload: Workload,
    choice: PolicyChoice,
    options: RunOptions,
    alone: dict[str, float],
    run_dir: Path,
    messages: Any,
) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    heap.ends_with_run()  # this process runs one policy, then exits
    progress = throttled(lambda *p: messages.put(("progress", index, p)))
    try:
        outcome = runner.run(workload, choice, options, alone, progress, run_dir)
    except Exception as e:  # sent to the parent, which names the policy
        text = str(e) if isinstance(e, TreadleError) else f"{type(e).__name__}: {e}"
        messages.put(("error", index, (text, traceback.format_exc())))
    else:
        messages.put(("done", index, outcome))


def _died(process: BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit status {code}"


def run_in_processes(
    runner: Runner,
    workload: Workload,
    choices: Sequence[PolicyChoice],
    options: RunOptions,
    alone: dict[str, float],
    out_dir: Path,
    workers: int,
    progress: dict[str, ProgressFn | None],
    on_finished: Callable[[str, Any, metrics.RunMetrics], None] | None,
    *,
    ctx: Any = None,
    all_started: Callable[[], None] | None = None,
) -> dict[str, Outcome]:
    """Run every choice in worker processes (at most ``workers`` at once, in the order
    given), each writing under ``out_dir/NAME``; return the outcomes by policy.
    ``all_started`` is called once the last run has started (this process is idle from
    then on: it may prepare the report). A run that raises, or whose process dies, is one
    ``TreadleError`` naming its policy; the other runs are stopped."""
    if ctx is None or (ctx.get_start_method() == "fork" and threading.active_count() > 1):
        ctx = mp_context()  # a thread started since ``ctx`` was chosen: no plain fork
    messages = ctx.Queue()
    waiting = deque(enumerate(choices))
    running: dict[int, BaseProcess] = {}
    ended: list[BaseProcess] = []
    done: dict[str, Outcome] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                i, c = waiting.popleft()
                process = ctx.Process(
                    target=_worker,
                    args=(i, runner, workload, c, options, alone, out_dir / c.name, messages),
                    name=f"treadle-compare-{c.name}",
                    daemon=True,
                )
                process.start()
                running[i] = process
                if not waiting and all_started is not None:
                    all_started()
            # A process flushes its queue before it exits: one that had exited before this
            # wait, when the wait finds nothing, has sent everything it ever will; if its
            # outcome is not among that, it died.
            exited = [i for i, process in running.items() if process.exitcode is not None]
            try:
                kind, i, payload = messages.get(timeout=PROGRESS_INTERVAL_S)
            except queue_mod.Empty:
                if exited:
                    raise TreadleError(
                        f"policy {choices[exited[0]].name}: its worker process died "
                        f"({_died(running[exited[0]])}) before the run ended"
                    ) from None
                continue
            name = choices[i].name
            if kind == "progress":
                fn = progress[name]
                if fn is not None:
                    fn(*payload)
            elif kind == "error":
                text, trace = payload
                log.debug("policy %s failed in its worker:\n%s", name, trace)
                raise TreadleError(f"policy {name}: {text}")
            else:
                done[name] = payload
                # Reaped later: the next run starts without waiting for this one's exit.
                ended.append(running.pop(i))
                if on_finished is not None:
                    on_finished(name, *payload)
    finally:
        for process in running.values():  # an error, or an interrupt: stop the others
            process.terminate()
        for process in [*running.values(), *ended]:
            process.join()
        messages.close()
        messages.cancel_join_thread()
    return done
