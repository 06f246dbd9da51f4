"""A third-party policy package, installed the way a user would install one, runs through
the CLI without any change to treadle itself."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inner_pytest import run_pytest

PLUGIN_SRC = Path(__file__).resolve().parents[1] / "thirdparty" / "treadle-lifo"
TREADLE = [sys.executable, "-m", "treadle.cli"]

WORKLOAD = """
cluster:
  nodes: [{count: 1, resources: {vcores: 2, memory_mb: 4096}}]
jobs:
  - {name: first, user: u, submit_s: 0,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: second, user: u, submit_s: 1,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: third, user: u, submit_s: 2,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
"""


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (ignored ones too) and a digest of its bytes."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def plugin_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugin") / PLUGIN_SRC.name


@pytest.fixture(scope="module")
def plugin_env(plugin_copy: Path) -> Iterator[dict[str, str]]:
    """Install the plugin package into a site directory of its own, on PYTHONPATH.

    It is built from a copy: a build writes build/ and *.egg-info next to its sources, and
    in the source tree they would change what later runs collect. The tree is checked
    unchanged afterwards.
    """
    before = _tree(PLUGIN_SRC)
    src = plugin_copy
    shutil.copytree(
        PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    site = src.parent / "site"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
            "--no-build-isolation", "--no-index", "--target", str(site), str(src),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    yield env
    assert _tree(PLUGIN_SRC) == before, f"the tests changed {PLUGIN_SRC}"


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + args, env=env, capture_output=True, text=True, timeout=120)


def test_installed_policy_is_listed_with_its_distribution(plugin_env: dict[str, str]) -> None:
    listing = _run(["policies", "--json"], plugin_env)
    assert listing.returncode == 0, listing.stderr
    rows = {r["name"]: r for r in json.loads(listing.stdout)["policies"]}
    assert rows["lifo"]["distribution"] == "treadle-lifo"
    assert "newest application first" in rows["lifo"]["description"]
    assert {"fifo", "capacity", "fair", "drf"} <= rows.keys()


def _finish_order(out: Path) -> list[str]:
    with (out / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [r["name"] for r in sorted(rows, key=lambda r: float(r["finish_s"]))]


def test_installed_policy_runs_through_the_cli(plugin_env: dict[str, str], tmp_path: Path) -> None:
    wl = tmp_path / "three.yaml"
    wl.write_text(WORKLOAD)
    lifo = _run(["sim", str(wl), "--policy", "lifo", "--out", str(tmp_path / "lifo")], plugin_env)
    assert lifo.returncode == 0, lifo.stderr
    # "first" starts alone on both slots; when its first wave ends, the newest job is served
    # before the older ones, "first" included.
    assert _finish_order(tmp_path / "lifo") == ["third", "second", "first"]
    summary = json.loads((tmp_path / "lifo" / "summary.json").read_text())
    assert summary["policy"] == "lifo"
    assert summary["finished"] == 3

    fifo_like = _run(
        ["sim", str(wl), "--policy", "lifo", "--set", "newest_first=false", "--out",
         str(tmp_path / "oldest")],
        plugin_env,
    )  # fmt: skip
    assert fifo_like.returncode == 0, fifo_like.stderr
    assert _finish_order(tmp_path / "oldest") == ["first", "second", "third"]


def test_plugin_parameters_are_validated(plugin_env: dict[str, str], tmp_path: Path) -> None:
    wl = tmp_path / "three.yaml"
    wl.write_text(WORKLOAD)
    bad = _run(
        ["sim", str(wl), "--policy", "lifo", "--set", "newest_first=perhaps", "--out",
         str(tmp_path / "x")],
        plugin_env,
    )  # fmt: skip
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr
    assert "newest_first" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_the_packages_own_tests_pass_with_treadles_pytest_plugin(
    plugin_env: dict[str, str], plugin_copy: Path
) -> None:
    """Its tests/ use the treadle_sim and treadle_cluster fixtures, lifo found by name in
    the simulator and in the live cluster's RM process alike."""
    inner = run_pytest(["-q", "-rA"], plugin_copy, plugin_env)
    assert inner.returncode == 0, inner.stdout + inner.stderr
    assert "5 passed" in inner.stdout, inner.stdout
