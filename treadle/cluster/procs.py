"""OS processes of a local cluster by pid, its state file, and the processes' logs.

A local cluster may have been started by another command (``treadle cluster up``), so
what it runs is recorded in ``cluster.json`` and read back by pid. Pids are signalled
only while they still belong to the process that was started (same start time in
``/proc``). Each cluster process leads a process group of its own, swept on stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle.errors import InputError, TreadleError

STATE_FILE = "cluster.json"
LOG_TAIL_LINES = 12


@dataclass
class ProcessInfo:
    """One OS process of a cluster, as recorded in cluster.json."""

    name: str  # "rm", "nm-1", ..., "am"
    pid: int
    argv: list[str]
    log: str
    started: int | None = None  # /proc start time (clock ticks after boot): pid-reuse guard
    restarts: int = 0  # how often the supervisor started it again (treadle.cluster.supervisor)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of ``pid`` from /proc, or None where /proc is missing."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else None


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` runs (zombies count as dead) and, when ``started`` is given, is still
    the process that was started then (not a later process that reused the pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return started is None  # someone else's process: cannot be ours
    stat = _proc_stat(pid)
    if stat is None:
        # Gone since kill(0), or a system without /proc (then kill(0) is all we know).
        return not Path("/proc/self").exists()
    state, start = stat
    if state in ("Z", "X"):
        return False
    return started is None or start == started


def signal_group(pid: int, sig: int) -> None:
    """Signal the process group led by ``pid`` (each cluster process leads its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def terminate(processes: Sequence[ProcessInfo], grace_s: float = 5.0) -> list[str]:
    """SIGTERM every live recorded process, wait up to ``grace_s``, SIGKILL the rest and
    what their groups still hold. Returns the names that needed SIGKILL."""
    live = [p for p in processes if pid_alive(p.pid, p.started)]
    for p in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p.pid, p.started) for p in live):
        time.sleep(0.05)
    killed = []
    for p in live:
        if pid_alive(p.pid, p.started):
            killed.append(p.name)
        signal_group(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(pid_alive(p.pid, p.started) for p in live):
        time.sleep(0.02)
    return killed


# --------------------------------------------------------------------------------------
# The state file


def read_state(workdir: Path) -> dict[str, Any] | None:
    path = workdir / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise InputError(str(path), None, f"unreadable cluster state: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
        raise InputError(str(path), None, "not a treadle cluster state file")
    return data


#: The umask of a cluster's processes: what they write is their account's alone.
PRIVATE_UMASK = 0o077


def write_private(path: Path, text: str) -> None:
    """Write ``path`` whole (aside, then renamed), mode 0600 from its first byte."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_state(workdir: Path, state: Mapping[str, Any]) -> None:
    write_private(workdir / STATE_FILE, json.dumps(state, indent=2, default=str) + "\n")


def _process_info(p: Any) -> ProcessInfo | None:
    try:
        return ProcessInfo(
            str(p["name"]),
            int(p["pid"]),
            [str(a) for a in p.get("argv", [])],
            str(p.get("log", "")),
            int(p["started"]) if p.get("started") is not None else None,
            int(p.get("restarts") or 0),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def recorded_processes(state: Mapping[str, Any]) -> list[ProcessInfo]:
    """The cluster's role processes (the supervisor aside)."""
    found = (_process_info(p) for p in state.get("processes", []))
    return [p for p in found if p is not None]


def recorded_supervisor(state: Mapping[str, Any]) -> ProcessInfo | None:
    """The supervisor process of a detached cluster (treadle.cluster.supervisor), if any."""
    sup = state.get("supervisor")
    return _process_info(sup) if isinstance(sup, dict) else None


def live_processes(state: Mapping[str, Any]) -> list[ProcessInfo]:
    return [p for p in recorded_processes(state) if pid_alive(p.pid, p.started)]


def stop_recorded(workdir: Path, grace_s: float = 5.0) -> dict[str, Any]:
    """Stop the cluster recorded in ``workdir`` (``treadle cluster down``) and remove its
    state file; return the state that was recorded."""
    state = read_state(workdir)
    if state is None:
        raise TreadleError(f"no cluster is recorded in {workdir} (no {STATE_FILE})")
    supervisor = recorded_supervisor(state)
    if supervisor is not None:
        # First, so that it restarts nothing; then the roles as it last recorded them.
        terminate([supervisor], grace_s)
        state = read_state(workdir) or state
    terminate(recorded_processes(state), grace_s)
    left = live_processes(state)
    if left:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in left)
        raise TreadleError(f"could not stop {names}; {workdir / STATE_FILE} is kept")
    (workdir / STATE_FILE).unlink(missing_ok=True)
    return state


# --------------------------------------------------------------------------------------
# Logs


def log_tail(path: Path | str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16_384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _last_lag(lines: list[str]) -> dict[str, Any] | None:
    for line in reversed(lines):
        if '"lag"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        lag = rec.get("lag") if isinstance(rec, dict) else None
        if isinstance(lag, dict):
            return lag
    return None


def lag_summary(log: Path | str) -> dict[str, Any] | None:
    """The last lag summary (treadle.live.lag) a process logged: the one it logs when it
    stops, or else the last periodic one (JSON log lines)."""
    found = _last_lag(log_tail(log, 50).splitlines())
    if found is None:  # killed, or a noisy end: look through the whole log
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                found = _last_lag(f.read().splitlines())
        except OSError:
            return None
    return found
