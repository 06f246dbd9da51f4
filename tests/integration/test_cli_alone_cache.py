"""``treadle sim`` and ``treadle compare`` keep the alone references in the on-disk cache
(``$TREADLE_CACHE_DIR``) unless ``--no-cache``; a warm run writes the same files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TREADLE = [sys.executable, "-m", "treadle.cli"]


def treadle(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TREADLE_CACHE_DIR": str(cache)}
    proc = subprocess.run(
        TREADLE + list(args), capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "alone").rglob("*.json")) if (cache / "alone").exists() else []


def files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_sim_fills_the_cache_and_a_warm_run_writes_the_same_files(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    treadle(cache, "sim", "demo", "--policy", "drf", "--out", str(tmp_path / "cold"))
    stored = entries(cache)
    assert stored
    mtimes = [p.stat().st_mtime_ns for p in stored]
    treadle(cache, "sim", "demo", "--policy", "drf", "--out", str(tmp_path / "warm"))
    assert entries(cache) == stored
    assert [p.stat().st_mtime_ns for p in stored] == mtimes  # read, not rewritten
    assert files(tmp_path / "warm") == files(tmp_path / "cold")


def test_no_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    treadle(cache, "sim", "demo", "--policy", "fifo", "--out", str(tmp_path / "a"), "--no-cache")
    assert entries(cache) == []
    treadle(cache, "sim", "demo", "--policy", "fifo", "--out", str(tmp_path / "b"))
    assert files(tmp_path / "a") == files(tmp_path / "b")
    out = tmp_path / "compared"
    treadle(cache, "compare", "demo", "--policies", "fifo,drf", "--out", str(out), "--no-cache")
    assert (out / "fifo" / "summary.json").read_bytes() == (
        tmp_path / "a" / "summary.json"
    ).read_bytes()
