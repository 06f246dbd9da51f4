"""The RM's state store: what a restarted RM needs, in SQLite (WAL) under ``--state-dir``.

It keeps the cluster's clock (epoch and dilation), every application (its submission, job,
state, attempts, those not counted against its maximum, and the tasks its AM reported
done: ``rm.core.state.AppRecord``), the AM and node tokens the gate issued, each user's newest
signed-request timestamp (the replay window: a request accepted before a restart is
refused after it), and the budget accounts' balances. Each write commits at
once (WAL, ``synchronous=FULL``: neither a killed process nor a power cut loses a
commit), so a kill -9 of the RM loses at most what the service had not
written yet (see ``RmServer.persist``). Service layer: the cores never see it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from rm.core.ended import EndedApp
from rm.core.facade import ResourceManager
from rm.core.reports import every_app
from rm.core.state import Application, AppRecord, AppState
from rm.policy.accounts import AccountBalance
from rm.server.runlog import logged_next_seq, read_events
from treadle import events as ev
from treadle.errors import TreadleError
from treadle.live import wire
from treadle.live.auth import check_private
from treadle.live.gate import Gate
from treadle.messages import AppSubmission
from treadle.rpc.v1 import common_pb2 as pb

log = structlog.get_logger("rm")
DB_NAME = "rm-state.sqlite"
SCHEMA_VERSION = 1
#: The WAL file is cut back to this size after a checkpoint (SQLite's journal_size_limit).
WAL_LIMIT_BYTES = 4 * 1024 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS apps (
    app_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, job BLOB, record TEXT NOT NULL,
    am_token TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS done_tasks (
    app_id TEXT NOT NULL, stage INTEGER NOT NULL, task INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS done_tasks_app ON done_tasks (app_id);
CREATE TABLE IF NOT EXISTS node_tokens (node_id TEXT PRIMARY KEY, token TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS balances (
    queue TEXT PRIMARY KEY, budget REAL NOT NULL, spending_rate REAL NOT NULL);
CREATE TABLE IF NOT EXISTS replay (user TEXT PRIMARY KEY, newest_ns INTEGER NOT NULL);
"""
# Schema changes stay backward compatible within a version: a new table is created when
# an older store is opened (``replay``), a new field of an application's record is read
# with its default when absent (``uncounted_attempts``; the submission's ``priority``,
# ``app_type`` and ``tags``). Anything else: a new version, and a store of another
# version is refused (``_damage``) before anything is written to it.


@dataclass
class StoredState:
    """Everything a store holds, as read at start-up."""

    epoch: float | None = None
    dilation: float | None = None
    restarts: int = 0
    apps: list[AppRecord] = field(default_factory=list)  # in submission order
    am_tokens: dict[str, str] = field(default_factory=dict)
    node_tokens: dict[str, str] = field(default_factory=dict)
    balances: dict[str, AccountBalance] = field(default_factory=dict)
    replay: dict[str, int] = field(default_factory=dict)  # user -> newest timestamp (ns)
    #: No id below ``application_{next_seq + 1}`` is handed out again: the store's mark
    #: (every id a previous run acknowledged, dropped ones too) or the event log's.
    next_seq: int = 0

    @property
    def empty(self) -> bool:
        return self.epoch is None


class StateStore:
    """One RM's store: ``DIR/rm-state.sqlite``, created on first use.

    Its header (the ``meta`` table) names the schema, the cluster it belongs to
    (``cluster``: a digest of the node secret, ``Gate.cluster_id``) and, once the RM has
    started, the clock's epoch; ``open`` is 1 from the RM's start until its clean close.
    An existing store is refused, in one line naming the file and what is wrong, when it
    is empty, not a store, corrupt (``PRAGMA quick_check``), another cluster's, or was
    left open without its WAL (the last commits are lost); ``fresh`` sets such a store
    aside (renamed) and begins anew. Each commit is durable before it returns (WAL with
    ``synchronous=FULL``: the WAL is synced at every commit)."""

    def __init__(self, directory: str | Path, *, cluster: str = "", fresh: bool = False) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        problem = self._open(cluster)
        if problem is not None and fresh:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self._db.close()
            _set_aside(self.path)
            problem = self._open(cluster)
        if problem is not None:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self._db.close()
            raise TreadleError(
                f"{self.path}: the state store is {problem}; refused (--fresh-state sets it "
                "aside and starts an empty store)"
            )
        with self._tx():
            if self._meta("schema") is None:  # a new store (an old one's was checked)
                self._put_meta("schema", SCHEMA_VERSION)
            self._put_meta("cluster", cluster)
            self._put_meta("open", 1)
        # The open mark must be in the main file: a WAL missing later then shows.
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _open(self, cluster: str) -> str | None:
        """Open (or create) the store's file; what is wrong with it, if anything."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            created = _private_files(self.path)
            wal_present = _wal(self.path).exists()
            self._db = sqlite3.connect(self.path, isolation_level=None)
            problem = None if created else _damage(self._db, self.path, cluster, wal_present)
            if problem is None:
                if created:  # before any table: pages freed go back to the file system
                    self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                # A large submission grows the WAL; each checkpoint cuts it back to this.
                self._db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
                self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as e:
            problem = f"unreadable ({e})"
        return problem

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error, OSError), self._tx():
            self._put_meta("open", 0)
        self._db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        """One transaction (the connection is in autocommit mode: without it, each row
        would be a commit of its own); a write SQLite could not make raises an OSError
        naming the file (``_write_error``)."""
        db = self._db
        try:
            db.execute("BEGIN")
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.OperationalError as e:
            raise _write_error(e, self.path) from e

    # ------------------------------------------------------------------ meta
    def _meta(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _put_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    def save_restarts(self, restarts: int) -> None:
        with self._tx():
            self._put_meta("restarts", restarts)

    def save_clock(self, epoch: float, dilation: float) -> None:
        with self._tx():
            self._put_meta("epoch", epoch)
            self._put_meta("dilation", dilation)

    # ------------------------------------------------------------------ applications
    def save_apps(
        self, records: Iterable[AppRecord], am_tokens: Mapping[str, str], *, new: bool
    ) -> None:
        """Write these applications: ``new`` ones whole, else only what changes
        (``save_changes``)."""
        records = list(records)
        self.save_changes(records if new else [], [] if new else records, am_tokens)

    def save_changes(
        self,
        fresh: Sequence[AppRecord],
        changed: Sequence[AppRecord],
        am_tokens: Mapping[str, str],
        *,
        dropped: Sequence[str] = (),
        next_seq: int | None = None,
    ) -> None:
        """Write in one transaction: the ``fresh`` applications whole (with their job and
        AM token), of the ``changed`` ones only what changes (the record), the done tasks
        each record carries (those not written yet), the mark of ids handed out
        (``next_seq``); and delete the ``dropped`` ones (``rm.core.ended``). An ended
        application keeps neither its job nor its done tasks (its AM never registers
        again), and the pages they took go back to the file system."""
        rows = [
            (r.app_id, r.seq, _job_bytes(r.submission), json.dumps(r.to_json()),
             am_tokens.get(r.app_id, ""))
            for r in fresh
        ]  # fmt: skip
        updates: list[tuple[str, str]] = []
        ends: list[tuple[str, str]] = []
        for r in changed:
            (updates if r.state is AppState.RUNNING else ends).append(
                (json.dumps(r.to_json()), r.app_id)
            )
        done = [(r.app_id, s, t) for r in (*fresh, *changed) for s, t in r.done_tasks]
        gone = [(a,) for a in dropped]
        if not (rows or changed or gone or next_seq is not None):
            return
        db = self._db
        with self._tx():
            db.executemany(
                "INSERT OR REPLACE INTO apps (app_id, seq, job, record, am_token) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            db.executemany("UPDATE apps SET record = ? WHERE app_id = ?", updates)
            # SQLite writes a row whole: an ended one's record and job in one update.
            db.executemany("UPDATE apps SET record = ?, job = NULL WHERE app_id = ?", ends)
            db.executemany("INSERT INTO done_tasks (app_id, stage, task) VALUES (?, ?, ?)", done)
            db.executemany("DELETE FROM done_tasks WHERE app_id = ?", [(a,) for _, a in ends])
            db.executemany("DELETE FROM apps WHERE app_id = ?", gone)
            db.executemany("DELETE FROM done_tasks WHERE app_id = ?", gone)
            if next_seq is not None:
                self._put_meta("next_seq", next_seq)
        if ends or gone:
            db.executescript("PRAGMA incremental_vacuum;")  # to the end (execute: one page)

    def save_node_token(self, node_id: str, token: str) -> None:
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO node_tokens (node_id, token) VALUES (?, ?)",
                (node_id, token),
            )

    def save_replay(self, user: str, newest_ns: int) -> None:
        """A user's newest accepted timestamp (``auth.ReplayWindow.on_accept``)."""
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO replay (user, newest_ns) VALUES (?, ?)", (user, newest_ns)
            )

    def save_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        with self._tx():
            self._db.execute("DELETE FROM balances")
            self._db.executemany(
                "INSERT INTO balances (queue, budget, spending_rate) VALUES (?, ?, ?)",
                [(q, b.budget, b.spending_rate) for q, b in balances.items()],
            )

    # ------------------------------------------------------------------ reading
    def load(self) -> StoredState:
        """The whole store (a TreadleError naming the file when a row cannot be read)."""
        out = StoredState(
            epoch=self._meta("epoch"),
            dilation=self._meta("dilation"),
            restarts=int(self._meta("restarts") or 0),
            next_seq=int(self._meta("next_seq") or 0),
        )
        db = self._db
        try:
            done: dict[str, list[tuple[int, int]]] = {}
            for app_id, stage, task in db.execute(
                "SELECT app_id, stage, task FROM done_tasks ORDER BY rowid"
            ):
                done.setdefault(app_id, []).append((int(stage), int(task)))
            for app_id, _seq, job, record, token in db.execute(
                "SELECT app_id, seq, job, record, am_token FROM apps ORDER BY seq"
            ):
                data = json.loads(record)
                msg = _job_of(job)
                spec = None
                if msg is not None:
                    spec = wire.job_from_pb(msg, data["user"], data["queue"], data["submit_s"])
                out.apps.append(AppRecord.from_json(data, spec, done.get(app_id, ())))
                if token:
                    out.am_tokens[app_id] = token
            out.node_tokens = dict(db.execute("SELECT node_id, token FROM node_tokens"))
            out.replay = {
                str(u): int(n) for u, n in db.execute("SELECT user, newest_ns FROM replay")
            }
            out.balances = {
                q: AccountBalance(b, r)
                for q, b, r in db.execute("SELECT queue, budget, spending_rate FROM balances")
            }
        except (sqlite3.Error, ValueError, KeyError, TypeError, TreadleError) as e:
            raise TreadleError(f"{self.path}: unreadable state store: {e}") from None
        return out


#: SQLite's primary result codes of a write the disk refused, as errno values
#: (``treadle.live.fatal``): SQLite reports a size limit (EFBIG) as an I/O error.
_WRITE_ERRNO = {13: errno.ENOSPC, 10: errno.EIO, 8: errno.EROFS}  # FULL, IOERR, READONLY


def _write_error(e: sqlite3.OperationalError, path: Path) -> Exception:
    """``e`` as an OSError naming the store's file when it is a refused write, else ``e``."""
    code = _WRITE_ERRNO.get(getattr(e, "sqlite_errorcode", 0) & 0xFF)
    return e if code is None else OSError(code, f"{e} (SQLite)", str(path))


def _private_files(db: Path) -> bool:
    """The store's files are the RM's alone: a new one is created mode 0600 before SQLite
    opens it (its WAL and shared-memory files take the same mode), one that other accounts
    may read is refused (``auth.check_private``). True if the store is new."""
    created = False
    with contextlib.suppress(FileExistsError):
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        created = True
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if path.exists():
            check_private(path, "state store")
    return created


def _wal(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def _set_aside(db: Path) -> None:
    """Rename a store's files out of the way (``--fresh-state``), keeping them to look at."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for path in (db, _wal(db), db.with_name(db.name + "-shm")):
        if path.exists():
            path.rename(path.with_name(f"{path.name}.set-aside-{stamp}"))


def _damage(db: sqlite3.Connection, path: Path, cluster: str, wal_present: bool) -> str | None:
    """What is wrong with an existing store, or None."""
    wal = _wal(path)
    if path.stat().st_size == 0 and not (wal_present and wal.stat().st_size > 0):
        return "empty (0 bytes)"
    try:
        rows = db.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)]:
            first = str(rows[0][0]).strip().splitlines()[-1] if rows else "no answer"
            return f"corrupt (quick_check: {first}, and {len(rows) - 1} more)"
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in names:
            return "not a treadle state store (no header)"
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    except (sqlite3.Error, ValueError) as e:
        if "malformed" in str(e):
            return f"corrupt ({e})"
        return f"not a treadle state store ({e})"
    if "schema" not in meta:
        return "not a treadle state store (no schema in its header)"
    if meta["schema"] != SCHEMA_VERSION:  # before anything is written to it
        version = meta["schema"]
        return f"of schema {version!r}, which this RM does not read (it reads {SCHEMA_VERSION})"
    theirs = meta.get("cluster")
    if theirs is not None and theirs != cluster:
        return f"another cluster's (its identity {theirs!r}, this RM's {cluster!r})"
    if meta.get("open") == 1 and not wal_present:
        return (
            "missing its WAL: the RM that wrote it did not close it, so its last commits are lost"
        )
    return None


Sig = tuple[str, int, bool, int, int]


def _sig(app: Application | EndedApp) -> Sig:
    """What changes whenever something the store keeps of ``app`` changes (state,
    attempt, AM registered, tasks done: how many are written, attempts not counted)."""
    return (app.state, app.attempt, app.am_registered, len(app.done_tasks),
            app.uncounted_attempts)  # fmt: skip


class Persister:
    """What an RM service writes to its store, and when: the applications whose stored
    part changed since the last write (and the deletion of those the RM dropped), the
    mark of ids handed out, and the budget balances when they changed."""

    def __init__(self, store: StateStore, rm: ResourceManager, gate: Gate):
        self.store = store
        self.rm = rm
        self.am_tokens = gate.am_tokens  # an application's is written with it
        # Every signed request's new newest timestamp is written before it is let through.
        gate.replay.on_accept = store.save_replay
        st = rm.state
        self._stored = {a.app_id: _sig(a) for a in every_app(st)}
        self._gone: list[str] = []  # dropped by the RM, not yet deleted from the store
        self._next_seq = -1  # the mark of ids last written (none yet)
        self._balances = dict(rm.accounts.balances()) if rm.accounts.enabled else None
        self._at = -math.inf  # time.monotonic() of the last periodic write (none yet)
        self._uncounted = rm.apps.uncounted_failures

    def persist(
        self, app_ids: Sequence[str] = (), *, every_s: float = 0.0, dropped: Sequence[str] = ()
    ) -> None:
        """Write to the store what changed since the last write: these applications, or
        (none named) every application whose stored part changed (state, attempt, tasks
        done), the ``dropped`` ones deleted (``ResourceManager.take_dropped_apps``; in the
        same transaction), and the budget accounts' balances. Submissions, ends and budget
        calls write at once; the housekeeping loop calls this every ``every_s`` wall
        seconds (a restart loses at most that much of the done-task reports, which the
        AMs send again when they register again)."""
        wall = time.monotonic()
        self._gone += dropped
        if not app_ids and not self._gone and wall - self._at < every_s:
            return
        rm = self.rm
        stored = self._stored
        if app_ids:
            ids = list(app_ids)
        else:
            self._at = wall
            st = rm.state
            ids = [a for a in st.finished if a not in stored or stored[a][0] == "RUNNING"]
            ids += [a.app_id for a in st.apps.values() if stored.get(a.app_id) != _sig(a)]
        gone, self._gone = self._gone, []
        for app_id in gone:
            stored.pop(app_id, None)
        since = {a: stored[a][3] for a in ids if a in stored}
        records = rm.app_records(ids, since) if ids else []
        fresh = [r for r in records if r.app_id not in stored]
        next_seq = rm.apps.next_seq
        self.store.save_changes(
            fresh,
            [r for r in records if r.app_id in stored],
            self.am_tokens,
            dropped=gone,
            next_seq=None if next_seq == self._next_seq else next_seq,
        )
        self._next_seq = next_seq
        for r in records:
            app = rm.state.app(r.app_id)
            if app is not None:
                stored[r.app_id] = _sig(app)
        self.persist_balances()

    def persist_balances(self) -> None:
        """Write the budget accounts' balances if they changed (whichever call did it)."""
        if not self.rm.accounts.enabled:
            return
        balances = dict(self.rm.accounts.balances())
        if balances != self._balances:
            self.store.save_balances(balances)
            self._balances = balances


def _job_bytes(sub: AppSubmission) -> bytes | None:
    if sub.job is None:
        return None
    return bytes(wire.job_to_pb(sub.job).SerializeToString())


def _job_of(data: bytes | None) -> pb.JobSpec | None:
    if data is None:
        return None
    msg = pb.JobSpec()
    msg.ParseFromString(data)
    return msg


def restore(
    stored: StoredState,
    rm: ResourceManager,
    gate: Gate,
    dilation: float,
) -> float:
    """Reload a stored RM into a fresh core and gate; return the clock's epoch to use (the
    stored one, or at another dilation the one at which emulated time goes on from where
    it is). Containers come back when their nodes resync (``open_containers`` lists
    those to wait for)."""
    assert stored.epoch is not None
    assert stored.dilation is not None
    epoch = stored.epoch
    if dilation != stored.dilation:
        wall = time.time()
        epoch = wall - (wall - stored.epoch) * stored.dilation / dilation
    now = (time.time() - epoch) * dilation
    rm.restore(stored.apps, now, stored.restarts + 1, next_seq=stored.next_seq)
    gate.am_tokens.update(stored.am_tokens)
    gate.node_tokens.update(stored.node_tokens)
    gate.replay.restore(stored.replay)
    if rm.accounts.enabled and stored.balances:
        rm.accounts.restore(stored.balances)
    return epoch


def open_state(
    directory: str | Path, events: str | None, *, cluster: str, fresh: bool
) -> tuple[StateStore, StoredState, list[ev.Record]]:
    """The store under ``directory``, what it holds and, if it holds a run, that run's
    event log (``events``), each checked (``StateStore``, ``read_events``,
    ``check_events``); a refusal is a TreadleError of one line. ``fresh``: a store or
    event log that is refused is set aside (renamed) and the RM starts a new run."""
    store = StateStore(directory, cluster=cluster, fresh=fresh)
    stored = store.load()
    if stored.empty or not events:
        return store, stored, []
    try:
        previous = read_events(events)
        check_events(stored, previous, events)
    except TreadleError:
        if not fresh:
            store.close()
            raise
        store.close()
        _set_aside(store.path)
        _set_aside(Path(events))
        store = StateStore(directory, cluster=cluster)
        return store, store.load(), []
    stored.next_seq = max(stored.next_seq, logged_next_seq(previous))
    return store, stored, previous


def check_events(stored: StoredState, records: Iterable[ev.Record], path: str | Path) -> None:
    """Refuse an event log that lacks the submission of an application the store holds:
    it was cut short (the store commits a submission after the log has it)."""
    submitted = {r.get("job") for r in records if r.get("event") == ev.JOB_SUBMITTED}
    missing = [a.app_id for a in stored.apps if a.app_id not in submitted]
    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise TreadleError(
            f"{path}: the event log lacks the submissions of {len(missing)} application(s) "
            f"the state store holds ({shown}): cut short; refused (--fresh-state starts a "
            "new run)"
        )
