"""A study's two tidy tables, read back from its complete run directories.

``runs.parquet``: one row per run, in the study's order (workload, config, replication):
its key, workload, policy, config label, replication, seeds, every parameter the spec
sets (a column ``POLICY.PARAM``, null for the other policies) and every figure of its
``summary.json`` (nested ones flattened: ``utilization_vcores``; per-user and per-queue
figures left to ``jobs.parquet``). ``jobs.parquet``: every job of every run, with the
run's identifying columns first. Both are written whole or not at all, and hold the same
bytes whatever ran the units and in what order.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from treadle.study.units import RUNS_DIR, Unit, write_atomic

RUNS_PARQUET = "runs.parquet"
JOBS_PARQUET = "jobs.parquet"
ID_COLUMNS = ("key", "workload", "policy", "config", "replication", "seed", "phase_seed")
_NOT_FIGURES = ("parameters", "per_user", "per_queue", "best_user", "worst_user", "capacity")


def flat_figures(summary: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of ``summary`` by flattened name (``utilization_vcores``)."""
    out: dict[str, float] = {}
    for key, value in summary.items():
        if not prefix and key in _NOT_FIGURES:
            continue
        if isinstance(value, Mapping):
            out.update(flat_figures(value, f"{prefix}{key}_"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[prefix + key] = float(value)
    return out


def _column(values: Sequence[Any]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a grid of numbers and names
        return pa.array([None if v is None else str(v) for v in values])


def runs_table(units: Sequence[Unit], out_dir: Path, set_keys: Sequence[str]) -> pa.Table:
    """One row per unit (see the module)."""
    rows = []
    for u in units:
        summary = json.loads((out_dir / RUNS_DIR / u.key / "summary.json").read_text("utf-8"))
        rows.append((u, flat_figures(summary)))
    figures = sorted({name for _, f in rows for name in f})
    columns: dict[str, pa.Array] = {
        "key": pa.array([u.key for u, _ in rows]),
        "workload": pa.array([u.workload_name for u, _ in rows]),
        "policy": pa.array([u.config.policy for u, _ in rows]),
        "config": pa.array([u.config.label for u, _ in rows]),
        "replication": pa.array([u.replication.index for u, _ in rows], pa.int64()),
        "seed": pa.array([u.replication.seed for u, _ in rows], pa.int64()),
        "phase_seed": pa.array([u.replication.phase_seed for u, _ in rows], pa.int64()),
        "workload_seed": pa.array([u.workload.seed for u, _ in rows], pa.int64()),
    }
    for key in set_keys:
        policy, _, param = key.partition(".")
        columns[key] = _column(
            [u.config.params.get(param) if u.config.policy == policy else None for u, _ in rows]
        )
    for name in figures:
        columns[name] = pa.array([f.get(name) for _, f in rows], pa.float64())
    return pa.table(columns)


def jobs_table(units: Sequence[Unit], out_dir: Path) -> pa.Table:
    """Every job of every unit, each row led by its run's identifying columns."""
    parts = []
    for u in units:
        jobs = pq.read_table(out_dir / RUNS_DIR / u.key / JOBS_PARQUET)
        n = jobs.num_rows
        ids = {
            "key": pa.array([u.key] * n),
            "workload": pa.array([u.workload_name] * n),
            "policy": pa.array([u.config.policy] * n),
            "config": pa.array([u.config.label] * n),
            "replication": pa.array([u.replication.index] * n, pa.int64()),
            "seed": pa.array([u.replication.seed] * n, pa.int64()),
        }
        for name in jobs.column_names:
            ids[name if name not in ids else f"job_{name}"] = jobs.column(name)
        parts.append(pa.table(ids))
    return pa.concat_tables(parts, promote_options="default")


def write_table(table: pa.Table, path: Path) -> None:
    """``table`` as Parquet at ``path``, atomically (the same bytes for the same table)."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    write_atomic(path, buf.getvalue())


def write_tables(units: Sequence[Unit], out_dir: Path, set_keys: Sequence[str]) -> pa.Table:
    """runs.parquet and jobs.parquet of ``units``; returns the runs table."""
    runs = runs_table(units, out_dir, set_keys)
    write_table(runs, out_dir / RUNS_PARQUET)
    write_table(jobs_table(units, out_dir), out_dir / JOBS_PARQUET)
    return runs
