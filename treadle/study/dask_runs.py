"""Runs of a comparison on a Dask distributed cluster (``treadle compare --cluster
tcp://HOST:PORT``).

Dask does the scheduling: each run is one task (``distributed.Client.submit``), in the
order given; a worker that dies mid-run has its run started again on another worker by
the scheduler, and a run whose workers died ``distributed.scheduler.allowed-failures``
times (default 3) more is one error naming its policy; a run whose result was lost with
its worker before it was fetched is submitted again (``FETCH_RETRIES``).

The workers need not share this machine's filesystem: a task writes the run's files in a
temporary directory of its worker and returns them (name -> bytes) with what the report
needs; this process writes them under ``out_dir/NAME``, one run at a time as the runs
end, so the same files as a local run, whatever their format. The workload and the alone
references (computed here, with the local cache) travel in each task, not scattered once:
scattered data dies with the worker holding it, and the runs that need it with it.

Every worker must run the same treadle (and the scheduler and workers the same dask,
distributed, cloudpickle, msgpack and Python as this process): ``connect`` checks the
versions, and each task checks its worker's ``registry.source_digest`` against this
process's before it runs. Progress comes back as Dask events (``Worker.log_event``).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import tempfile
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.errors import TreadleError
from treadle.model import Workload
from treadle.registry import source_digest
from treadle.sim import ProgressFn
from treadle.study.parallel import Outcome, Runner, throttled
from treadle.study.runner import PolicyChoice, RunOptions

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
#: Packages whose versions must be equal on this process, the scheduler and the workers.
SAME_VERSIONS = ("dask", "distributed", "cloudpickle", "msgpack")
#: Times a finished run whose result was lost with its worker (before this process
#: fetched it) is submitted again.
FETCH_RETRIES = 2


@dataclass
class Connection:
    """A client of the scheduler at ``address``."""

    address: str
    client: Any  # distributed.Client

    def close(self) -> None:
        self.client.close()


def _import_client() -> Any:
    try:
        import distributed
    except ImportError:
        raise TreadleError(
            "--cluster needs dask and distributed: pip install 'treadle[dask]'"
        ) from None
    return distributed


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Connection:
    """A client of the scheduler at ``address``, checked: it answers within ``timeout_s``,
    runs the same versions as this process and has a worker (waited for as long)."""
    if "://" not in address or not address.split("://", 1)[1]:
        raise TreadleError(f"--cluster {address!r}: use tcp://HOST:PORT (a Dask scheduler)")
    distributed = _import_client()
    _probe(address)
    try:
        client = distributed.Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TreadleError(
            f"--cluster {address}: no Dask scheduler answered within {timeout_s:g} s ({reason})"
        ) from None
    connection = Connection(address, client)
    try:
        _check_versions(connection)
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (TimeoutError, OSError):
            raise TreadleError(
                f"--cluster {address}: the scheduler has no worker (waited {timeout_s:g} s); "
                f"start some with: dask worker {address}"
            ) from None
    except BaseException:
        connection.close()
        raise
    return connection


def _probe(address: str) -> None:
    """A refused connection or an unknown host fails at once (Dask would retry for its
    whole timeout)."""
    scheme, _, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme != "tcp" or not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (ConnectionRefusedError, socket.gaierror) as e:
        reason = "connection refused" if isinstance(e, ConnectionRefusedError) else e.strerror
        raise TreadleError(f"--cluster {address}: no Dask scheduler there ({reason})") from None
    except OSError:
        pass  # a timeout or such: the client says it


def _version(packages: dict[str, Any], name: str) -> str | None:
    value = packages.get(name)
    if name == "python" and value:  # 3.11.7.final.0: pickles need the same minor version
        return ".".join(str(value).split(".")[:2])
    return None if value is None else str(value)


def _check_versions(connection: Connection) -> None:
    versions = connection.client.get_versions()
    mine = versions["client"]["packages"]
    others = [("the scheduler", versions["scheduler"])]
    others += [(f"worker {w}", v) for w, v in sorted(versions["workers"].items())]
    for who, info in others:
        theirs = (info or {}).get("packages", {})
        for name in ("python", *SAME_VERSIONS):
            a, b = _version(mine, name), _version(theirs, name)
            if a != b:
                raise TreadleError(
                    f"--cluster {connection.address}: {who} has {name} {b or 'missing'}, "
                    f"this process {a}; use the same versions everywhere"
                )


def _remote_run(
    runner: Runner,
    workload: Workload,
    choice: PolicyChoice,
    options: RunOptions,
    alone: dict[str, float],
    code: str,
    topic: str,
    index: int,
) -> tuple[Any, metrics.RunMetrics, dict[str, bytes]]:
    """On a Dask worker: one run in a temporary directory; its files come back as bytes."""
    from distributed import get_worker

    if source_digest() != code:
        raise TreadleError(
            f"its Dask worker runs other treadle code ({source_digest()}, here {code}): "
            "install the same checkout on every worker"
        )
    worker = get_worker()
    every = throttled(lambda *p: worker.log_event(topic, [index, *p]))
    with tempfile.TemporaryDirectory(prefix="treadle-run-") as tmp:
        run_dir = Path(tmp) / choice.name
        result, run = runner.run(workload, choice, options, alone, every, run_dir)
        files = {
            p.relative_to(run_dir).as_posix(): p.read_bytes()
            for p in sorted(run_dir.rglob("*"))
            if p.is_file()
        }
    return result, run, files


def _error_of(future: Any) -> BaseException:
    """What a future that did not finish raises: its error, or its cancellation."""
    try:
        future.result()
    except BaseException as e:
        return e
    return RuntimeError(f"its task ended {future.status}")


def _failure(name: str, error: BaseException, address: str) -> TreadleError:
    kind = type(error).__name__
    if kind == "KilledWorker":
        return TreadleError(
            f"policy {name}: the Dask workers running it died too often (KilledWorker; the "
            "scheduler's distributed.scheduler.allowed-failures)"
        )
    if kind == "CancelledError":
        return TreadleError(f"policy {name}: its run was cancelled (the scheduler {address} lost?)")
    if isinstance(error, TreadleError):
        return TreadleError(f"policy {name}: {error}")
    if isinstance(error, ModuleNotFoundError):
        return TreadleError(
            f"policy {name}: a Dask worker cannot import {error.name!r}: install treadle on "
            "every worker"
        )
    return TreadleError(f"policy {name}: {kind}: {error}")


def _write_files(files: dict[str, bytes], run_dir: Path) -> None:
    for name, data in files.items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run_on_cluster(
    connection: Connection,
    runner: Runner,
    workload: Workload,
    choices: Sequence[PolicyChoice],
    options: RunOptions,
    alone: dict[str, float],
    out_dir: Path,
    progress: dict[str, ProgressFn | None],
    on_finished: Callable[[str, Any, metrics.RunMetrics], None] | None,
) -> dict[str, Outcome]:
    """Every choice as a task on the cluster; each run's files written under
    ``out_dir/NAME`` as it ends; the outcomes by policy (``run_dir`` is the local one)."""
    as_completed = _import_client().as_completed
    client = connection.client
    token = uuid.uuid4().hex[:12]
    topic = f"treadle-progress-{token}"

    def on_event(event: tuple[float, Any]) -> None:
        index, done, total, t = event[1]
        fn = progress[choices[index].name]
        if fn is not None:
            fn(done, total, t)

    client.subscribe_topic(topic, on_event)
    code = source_digest()
    names: dict[Any, int] = {}  # future -> index in choices
    attempts = dict.fromkeys(range(len(choices)), 0)

    def submit(i: int) -> Any:
        c = choices[i]
        attempts[i] += 1
        with warnings.catch_warnings():  # a large workload: it is meant to be in the task
            warnings.filterwarnings("ignore", "Large object", UserWarning)
            future = client.submit(
                _remote_run, runner, workload, c, options, alone, code, topic, i,
                key=f"treadle-{c.name}-{token}-{attempts[i]}", pure=False,
                priority=len(choices) - i,
            )  # fmt: skip
        names[future] = i
        return future

    pending = as_completed([submit(i) for i in range(len(choices))], loop=client.loop)
    done: dict[str, Outcome] = {}
    try:
        for future in pending:
            i = names[future]
            name = choices[i].name
            if future.status != "finished":
                raise _failure(name, _error_of(future), connection.address)
            try:
                result, run, files = future.result()
            except Exception as e:  # the worker that held it died before it came here
                if attempts[i] > FETCH_RETRIES:
                    raise _failure(name, e, connection.address) from None
                log.warning("policy %s: its result was lost with its worker; run again", name)
                pending.add(submit(i))
                continue
            future.release()  # the worker may forget the files now
            run_dir = out_dir / name
            _write_files(files, run_dir)
            del files
            if hasattr(result, "run_dir"):  # a RunResult: where its files are here
                result = dataclasses.replace(result, run_dir=run_dir)
            done[name] = (result, run)
            if on_finished is not None:
                on_finished(name, result, run)
    finally:
        unfinished = [f for f in names if not f.done()]
        if unfinished:
            client.cancel(unfinished)
        client.unsubscribe_topic(topic)
    return done
