"""A study's spec (``treadle study SPEC.yaml``): workloads x policies x parameter grids x
replications, validated whole before anything runs.

::

    workloads: [demo]              # built-in names or files (relative to the spec's folder)
    policies: [fifo, drf, uwfq]    # or: all
    baseline: fifo                 # the paired ratios are against it [default: fifo, if run]
    replications: 5
    vary: phases                   # phases | workload | both
    first_seed: 0                  # replication r uses seed first_seed + r
    set:                           # --set-style keys; a list expands as a grid
      drf.across: jobs
      uwfq.grace_resource_s: [1.0, 2.0, 4.0]
    metrics: [mean_jct_s, p95_jct_s]   # the statistics' metrics [default: DEFAULT_METRICS]

A replication varies what ``vary`` says: ``phases`` the nodes' heartbeat phases
(``--phase-seed``), ``workload`` the workload's own ``seed`` (another draw of its
generators and distributions: Poisson users, TPC-H draws, closed-loop users), ``both``
both with the same seed. Every problem is one ``InputError`` naming the spec file and the
field (``set['uwfq.grace_resource_s'][1]``), raised before any run starts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from treadle.errors import InputError, PluginError, TreadleError
from treadle.model import Workload
from treadle.registry import did_you_mean, discover
from treadle.study.runner import PolicyChoice, RunOptions, build_policy
from treadle.workload.scaling import MAX_LOAD, MAX_NODES_SCALE
from treadle.workload.schema import MAX_NODES
from treadle.yamlfile import Name, Strict, read_yaml, validation_error

#: The metrics the statistics cover when the spec names none (summary.json fields).
DEFAULT_METRICS = (
    "mean_jct_s",
    "p95_jct_s",
    "makespan_s",
    "mean_slowdown",
    "mean_wait_s",
    "jain_users_mean",
)
#: Every summary.json figure a spec's ``metrics`` may name (``utilization_RESOURCE`` too).
KNOWN_METRICS = (
    *DEFAULT_METRICS,
    "p50_jct_s",
    "p80_jct_s",
    "worst10_jct_s",
    "p50_slowdown",
    "p95_slowdown",
    "p95_wait_s",
    "jain_users_min",
    "jain_users_max",
    "jain_jobs_mean",
    "jain_jobs_min",
    "jain_jobs_max",
    "finished",
    "unfinished",
    "failed",
    "killed",
)
Scalar = str | int | float | bool


class StudyFile(Strict):
    """A study spec as written (see the module)."""

    workloads: list[Name] = Field(min_length=1)
    policies: list[Name] | Literal["all"] = Field(min_length=1)
    baseline: Name | None = None
    replications: int = Field(1, ge=1, le=1000)
    vary: Literal["phases", "workload", "both"] = "phases"
    first_seed: int = Field(0, ge=0)
    set: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    metrics: list[Name] = Field(default_factory=lambda: list(DEFAULT_METRICS), min_length=1)
    slowdown: bool = True
    events: Literal["parquet", "none"] = "parquet"
    drill_down: Literal["first", "all", "none"] = "first"
    # As sim's and compare's --queues, --strict, --nodes, --nodes-scale and --load.
    queues: Name | None = None
    strict_queues: bool = False
    nodes: int | None = Field(None, ge=1, le=MAX_NODES)
    nodes_scale: float | None = Field(None, gt=0, le=MAX_NODES_SCALE)
    load: float | None = Field(None, gt=0, le=MAX_LOAD)


@dataclass(frozen=True)
class Config:
    """One policy with one point of its parameter grid: a row of the study's tables."""

    policy: str
    params: Mapping[str, Any]  # every value the spec sets for it
    grid: Mapping[str, Any]  # the values of the keys that are lists (its grid point)

    @property
    def label(self) -> str:
        """``drf``, or ``uwfq[grace_resource_s=2.0]`` at a grid point."""
        if not self.grid:
            return self.policy
        inner = ",".join(f"{k}={v}" for k, v in self.grid.items())
        return f"{self.policy}[{inner}]".replace("/", "_")

    @property
    def choice(self) -> PolicyChoice:
        return PolicyChoice(self.policy, dict(self.params))


@dataclass(frozen=True)
class Replication:
    index: int
    seed: int
    phase_seed: int
    workload_seed: int | None  # None: the workload's own


@dataclass
class Study:
    """A validated spec: what runs, in the order its tables list them."""

    source: str
    doc: StudyFile
    workloads: list[str]  # as the spec names them (the tables' ``workload``)
    paths: list[str]  # what each is loaded from
    configs: list[Config]
    replications: list[Replication]
    baseline: str | None
    queues_path: str | None = None  # the spec's ``queues``, as loaded
    loaded: dict[tuple[int, int | None], tuple[Workload, dict[str, Any]]] = field(
        default_factory=dict
    )

    def workload(self, w: int, rep: Replication) -> Workload:
        """Workload ``w`` as replication ``rep`` draws it (loaded once per seed), in the
        spec's queues, scaled as it says."""
        return self._drawn(w, rep)[0]

    def _drawn(self, w: int, rep: Replication) -> tuple[Workload, dict[str, Any]]:
        key = (w, rep.workload_seed)
        if key not in self.loaded:
            from treadle.workload import load_workload
            from treadle.workload.scaling import scaled

            wl = load_workload(self.paths[w], seed=rep.workload_seed)
            if self.queues_path is not None:
                wl = _in_queues(wl, self.queues_path, self.doc.strict_queues)
            self.loaded[key] = scaled(wl, self.doc.nodes, self.doc.nodes_scale, self.doc.load)
        return self.loaded[key]

    def options(self, w: int, rep: Replication) -> RunOptions:
        return RunOptions(
            slowdown=self.doc.slowdown,
            phase_seed=rep.phase_seed,
            events=self.doc.events,
            workload_source=self.workloads[w],
            scaling=self._drawn(w, rep)[1] or None,
        )

    def identity(self) -> dict[str, Any]:
        """What makes two specs the same study (a directory holds one)."""
        data: dict[str, Any] = self.doc.model_dump(mode="json")
        data["workloads"] = self.paths
        if self.queues_path is not None:
            data["queues"] = self.queues_path
        return data


def _in_queues(wl: Workload, path: str, strict: bool) -> Workload:
    """``wl`` in the queue tree of a YARN scheduler file (``--queues``); the jobs it
    refuses are left out, each reason a warning line (as ``treadle sim`` prints them)."""
    import structlog

    from treadle.importers.yarnconf import load_queues
    from treadle.importers.yarnqueues import apply_queues

    imported = load_queues(Path(path), strict=strict)
    placed, lines = apply_queues(wl, imported)
    for line in [*imported.warnings(), *lines]:
        structlog.get_logger("study").warning("queues", file=path, note=line)
    return placed


def load_spec(path: Path) -> Study:
    """The study in spec file ``path``, validated (see the module)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(source, None, e.strerror or str(e)) from None
    data = read_yaml(text, source, InputError)
    return parse_spec(data, source, path.parent)


def parse_spec(data: object, source: str = "<study>", base_dir: Path = Path()) -> Study:
    """The study that plain ``data`` (a spec as read from YAML) describes, validated."""
    if not isinstance(data, dict):
        raise InputError(source, None, "a study spec is a mapping (workloads:, policies:, ...)")
    try:
        doc = StudyFile.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, source, StudyFile, InputError) from None
    policies = _policies(doc, source)
    configs = [c for p in policies for c in _configs(p, doc.set, source)]
    _check_set_keys(doc.set, policies, source)
    _check_metrics(doc.metrics, source)
    baseline = _baseline(doc, policies, configs, source)
    reps = [_replication(doc, r) for r in range(doc.replications)]
    paths = [_workload_path(w, base_dir) for w in doc.workloads]
    if doc.nodes is not None and doc.nodes_scale is not None:
        raise InputError(source, "nodes_scale", "give nodes or nodes_scale, not both")
    queues = None if doc.queues is None else _workload_path(doc.queues, base_dir)
    study = Study(source, doc, list(doc.workloads), paths, configs, reps, baseline, queues)
    for w in range(len(paths)):
        _load_checked(study, w, source)
    return study


def _policies(doc: StudyFile, source: str) -> list[str]:
    installed = list(discover("policies"))
    if doc.policies == "all":
        return installed
    for i, name in enumerate(doc.policies):
        if name not in installed:
            raise InputError(
                source,
                f"policies[{i}]",
                f"unknown policy {name!r} (installed: {', '.join(installed)})"
                + did_you_mean(name, installed),
            )
        if name in doc.policies[:i]:
            raise InputError(source, f"policies[{i}]", f"policy {name!r} is named twice")
    return list(doc.policies)


def _check_set_keys(settings: Mapping[str, Any], policies: Sequence[str], source: str) -> None:
    for key in settings:
        policy, dot, param = key.partition(".")
        if not dot or not param:
            raise InputError(source, f"set[{key!r}]", "use POLICY.PARAM as the key")
        if policy not in policies:
            raise InputError(
                source, f"set[{key!r}]", f"policy {policy!r} is not among the study's policies"
            )


def _configs(policy: str, settings: Mapping[str, Any], source: str) -> list[Config]:
    """``policy``'s grid points: every value checked alone (its line names the key and the
    list index), then every combination."""
    mine = {k.partition(".")[2]: v for k, v in settings.items() if k.partition(".")[0] == policy}
    fixed = {k: v for k, v in mine.items() if not isinstance(v, list)}
    axes = {k: v for k, v in mine.items() if isinstance(v, list)}
    for param, value in mine.items():
        values = value if isinstance(value, list) else [value]
        if not values:
            raise InputError(source, f"set[{policy + '.' + param!r}]", "an empty list: no grid")
        for i, one in enumerate(values):
            where = f"set[{policy + '.' + param!r}]" + (f"[{i}]" if isinstance(value, list) else "")
            _checked(PolicyChoice(policy, {param: one}), source, where)
    out = []
    for point in itertools.product(*axes.values()):
        grid = dict(zip(axes, point, strict=True))
        config = Config(policy, {**fixed, **grid}, grid)
        _checked(config.choice, source, "set")
        out.append(config)
    return out


def _checked(choice: PolicyChoice, source: str, where: str) -> None:
    try:
        build_policy(choice)
    except PluginError as e:
        raise InputError(source, where, str(e)) from None


def _check_metrics(metrics: Sequence[str], source: str) -> None:
    for i, name in enumerate(metrics):
        if name not in KNOWN_METRICS and not name.startswith("utilization_"):
            raise InputError(
                source,
                f"metrics[{i}]",
                f"unknown metric {name!r} (known: {', '.join(KNOWN_METRICS)}, utilization_R)"
                + did_you_mean(name, KNOWN_METRICS),
            )


def _baseline(
    doc: StudyFile, policies: Sequence[str], configs: Sequence[Config], source: str
) -> str | None:
    baseline = doc.baseline
    if baseline is None:
        return "fifo" if "fifo" in policies and len(configs) > 1 else None
    if baseline not in policies:
        raise InputError(source, "baseline", f"{baseline!r} is not among the study's policies")
    if sum(c.policy == baseline for c in configs) > 1:
        raise InputError(source, "baseline", f"{baseline!r} has a grid: pair against one point")
    return baseline


def _replication(doc: StudyFile, r: int) -> Replication:
    seed = doc.first_seed + r
    phase = seed if doc.vary in ("phases", "both") else 0
    drawn = seed if doc.vary in ("workload", "both") else None
    return Replication(r, seed, phase, drawn)


def _workload_path(name: str, base_dir: Path) -> str:
    beside = base_dir / name
    return str(beside) if beside.is_file() else name


def _load_checked(study: Study, w: int, source: str) -> None:
    """Load workload ``w`` as every replication draws it: a bad one fails now."""
    where = f"workloads[{w}]"
    if study.doc.vary != "phases":
        from treadle.workload import workload_format

        try:
            fmt = workload_format(study.paths[w])
        except TreadleError as e:
            raise InputError(source, where, str(e)) from None
        if fmt != "yaml":
            raise InputError(
                source, "vary", f"{study.workloads[w]} is a {fmt} trace: no seed to vary; "
                "use vary: phases"
            )  # fmt: skip
    for rep in study.replications:
        try:
            study.workload(w, rep)
        except TreadleError as e:
            raise InputError(source, where, str(e)) from None
