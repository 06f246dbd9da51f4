"""A study's runs as units of work with an identity, and their execution with resume.

A unit is one (workload as drawn, policy and parameters, replication) run. Its key is a
sha256 of the resolved workload (every field, ``alone_cache.canonical``), the policy's
name and resolved parameters, the run options (phase seed, slowdown, event log), the
replication's seed and the code version (``registry.source_digest``, as the alone-JCT
cache keys its references): the same inputs, the same key, whatever runs it.

A unit's files are written under ``runs/.partial-PID/KEY/`` and renamed to
``runs/KEY/`` when complete (a directory rename is atomic): a study killed at any point
leaves only complete runs, and running it again runs only the keys missing. Units run in
this process, in ``workers`` local processes (``treadle.study.parallel``) or on a Dask
scheduler (``treadle.study.dask_runs``), the same files either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.errors import InputError, TreadleError
from treadle.model import Workload
from treadle.registry import source_digest
from treadle.sim import ProgressFn
from treadle.study.alone_cache import canonical
from treadle.study.compare import RunResult, SimBackend
from treadle.study.runner import PolicyChoice, RunOptions, alone_jcts, build_policy
from treadle.study.spec import Config, Replication, Study

log = logging.getLogger(__name__)

FORMAT = 1  # bump when what a key covers changes
RUNS_DIR = "runs"
STUDY_JSON = "study.json"
UNIT_JSON = "unit.json"
PARTIAL = ".partial-"


@dataclass(frozen=True)
class Unit:
    """One run of a study, and where its row goes in the tables."""

    key: str
    workload_index: int
    workload_name: str
    config: Config
    replication: Replication
    workload: Workload
    options: RunOptions

    def describe(self) -> dict[str, Any]:
        """``unit.json``: what the run was (the tables' identifying columns)."""
        return {
            "key": self.key,
            "workload": self.workload_name,
            "policy": self.config.policy,
            "config": self.config.label,
            "params": dict(self.config.params),
            "replication": self.replication.index,
            "seed": self.replication.seed,
            "phase_seed": self.replication.phase_seed,
            "workload_seed": self.workload.seed,
        }


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def workload_digest(workload: Workload) -> str:
    """Every field of ``workload`` (its name included), as one sha256."""
    return _digest(canonical(workload))


def run_key(
    workload: Workload | str,
    choice: PolicyChoice,
    options: RunOptions,
    seed: int,
    code: str | None = None,
) -> str:
    """The identity of one run (see the module); ``workload``: it or its digest."""
    policy = build_policy(choice)
    digest = workload if isinstance(workload, str) else workload_digest(workload)
    return _digest(
        {
            "format": FORMAT,
            "code": code if code is not None else source_digest(),
            "workload": digest,
            "policy": choice.name,
            "params": policy.params.model_dump(mode="json"),
            "options": canonical(dataclasses.replace(options, workload_source=None)),
            "seed": seed,
        }
    )[:24]


def units_of(study: Study) -> list[Unit]:
    """Every run of ``study``, in the order of its tables: workload, config, replication."""
    code = source_digest()
    out: list[Unit] = []
    digests: dict[int, str] = {}
    for w, name in enumerate(study.workloads):
        for config in study.configs:
            for rep in study.replications:
                wl = study.workload(w, rep)
                digest = digests.setdefault(id(wl), workload_digest(wl))
                options = study.options(w, rep)
                key = run_key(digest, config.choice, options, rep.seed, code)
                out.append(Unit(key, w, name, config, rep, wl, options))
    return out


@dataclass(frozen=True)
class UnitChoice(PolicyChoice):
    """A unit as the runners of ``compare`` take a policy: named by its key."""

    unit: Unit | None = None


class UnitBackend(SimBackend):
    """Runs the unit its choice carries (its own workload, options and alone references;
    the arguments ``compare``'s runners pass for a whole comparison are not used)."""

    def run(
        self,
        workload: Workload,
        choice: PolicyChoice,
        options: RunOptions,
        alone: dict[str, float],
        progress: ProgressFn | None,
        run_dir: Path,
    ) -> tuple[RunResult, metrics.RunMetrics]:
        unit = choice.unit if isinstance(choice, UnitChoice) else None
        assert unit is not None, "a study's runner runs units"
        refs = alone_jcts(unit.workload, unit.options, workers=1) if unit.options.slowdown else {}
        return super().run(unit.workload, unit.config.choice, unit.options, refs, progress, run_dir)


def prepare_dir(out_dir: Path, study: Study, *, force: bool = False) -> None:
    """``out_dir`` as this study's directory: a new one, or the same study's (resumed). A
    directory of another study, or of anything else, is refused, unless ``force``: then it
    becomes this study's, whose runs already there are kept (a run's key is its inputs)."""
    identity = json.dumps(study.identity(), sort_keys=True, indent=2)
    marker = out_dir / STUDY_JSON
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("--out", None, f"{out_dir} is a file; give a directory")
    if marker.is_file():
        if marker.read_text(encoding="utf-8") == identity + "\n":
            return
        if not force:
            raise InputError(
                "--out", None, f"{out_dir} holds another study (its {STUDY_JSON} differs "
                f"from {study.source}); choose another --out, or pass --force to run this "
                "one there"
            )  # fmt: skip
    elif out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise InputError(
            "--out", None, f"{out_dir} exists and is not a study directory; choose another "
            "--out, or pass --force to write into it"
        )  # fmt: skip
    (out_dir / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    write_atomic(marker, (identity + "\n").encode())


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` written whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def pending(units: list[Unit], out_dir: Path, resume: bool = True) -> list[Unit]:
    """The units without a complete run directory (every unit with ``resume`` false);
    stale partial ones are removed."""
    runs = out_dir / RUNS_DIR
    for stale in runs.glob(PARTIAL + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    return [u for u in units if not (resume and (runs / u.key / UNIT_JSON).is_file())]


OnUnit = Callable[[Unit], None]


def execute(
    units: list[Unit],
    out_dir: Path,
    *,
    workers: int = 1,
    cluster: str | None = None,
    on_done: OnUnit | None = None,
) -> None:
    """Run ``units`` (the pending ones), each renamed into ``runs/KEY`` as it completes."""
    if not units:
        return
    runs = out_dir / RUNS_DIR
    partial = runs / f"{PARTIAL}{os.getpid()}"
    by_key = {u.key: u for u in units}
    choices = [UnitChoice(u.key, {}, u) for u in units]

    def finished(key: str, result: Any, run: Any) -> None:
        unit = by_key[key]
        text = json.dumps(unit.describe(), sort_keys=True, indent=2) + "\n"
        (partial / key / UNIT_JSON).write_text(text, encoding="utf-8")
        if (runs / key).exists():  # run again (--no-resume): the old one goes first
            shutil.rmtree(runs / key)
        os.replace(partial / key, runs / key)
        if on_done is not None:
            on_done(unit)

    backend = UnitBackend()
    # What compare's runners pass every run; a unit runs its own (UnitBackend).
    first, unused = units[0].workload, RunOptions()
    progress: dict[str, ProgressFn | None] = dict.fromkeys(by_key)
    try:
        if cluster is not None:
            from treadle.study import dask_runs

            connection = dask_runs.connect(cluster)
            try:
                dask_runs.run_on_cluster(
                    connection, backend, first, choices, unused, {}, partial, progress, finished
                )
            finally:
                connection.close()
        elif workers > 1:
            from treadle.study.parallel import run_in_processes

            n = min(workers, len(units))
            run_in_processes(backend, first, choices, unused, {}, partial, n, progress, finished)
        else:
            for c in choices:
                try:
                    outcome = backend.run(first, c, unused, {}, None, partial / c.name)
                except TreadleError as e:  # as the process and Dask runners name it
                    raise TreadleError(f"policy {c.name}: {e}") from e
                finished(c.name, *outcome)
    except TreadleError as e:  # the runners name a run by its key: say which run it is
        text = str(e)
        for key, u in by_key.items():
            text = text.replace(f"policy {key}", f"{u.workload_name} {u.config.label} seed "
                                f"{u.replication.seed} (run {key})")  # fmt: skip
        raise TreadleError(text) from e
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(partial)
