"""The README's first commands as a newcomer types them: after ``make demo``, activating
the venv puts ``treadle`` on the PATH, and every command of "Using it" works copied as
written, in order, from the repository root (here: a directory standing for the checkout
beside ``../shared``, so that the outputs land in a temporary place)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SHARED = ROOT.parent / "shared"


def block_after(heading: str) -> list[str]:
    """The command lines of the first ``sh`` block after ``heading``."""
    rest = README[README.index(heading) :]
    body = re.search(r"```sh\n(.*?)```", rest, re.S)
    assert body is not None, heading
    return [line for line in body.group(1).splitlines() if line.strip()]


def test_the_first_lines_say_how_treadle_gets_on_the_path() -> None:
    first = block_after("# treadle")
    assert first[0].startswith("make demo")
    assert first[1].startswith(". .venv/bin/activate")
    assert first[2].startswith("treadle --version")
    venv = ROOT / ".venv"
    if not (venv / "bin" / "activate").exists():
        pytest.skip("no .venv in the checkout (make demo or make setup makes it)")
    found = subprocess.run(
        ["bash", "-c", ". .venv/bin/activate && command -v treadle && treadle --version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0] == str(venv / "bin" / "treadle")
    assert found.stdout.splitlines()[1].startswith("treadle ")


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (the README's traces)")
def test_using_it_commands_work_as_written(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "treadle").symlink_to(ROOT / "treadle")  # treadle/workloads/demo.yaml
    (tmp_path / "shared").symlink_to(SHARED)
    bin_dir = str(Path(sys.executable).parent)  # what activating the venv does
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    for line in block_after("## Using it"):
        proc = subprocess.run(
            ["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    assert (checkout / "out" / "dags-long" / "report.md").exists()


@pytest.mark.slow
def test_the_admin_example_works_as_written(tmp_path: Path) -> None:
    """The Dynamic Priority admin block, as one shell script (its lines share ``$RM``):
    a local dp cluster of the built-in ``budgets`` workload, alice's key, her own
    queue's rate, an admin's budget, then the cluster stopped."""
    block = block_after("### Dynamic Priority admin API")
    assert block[-1] == "treadle cluster down"
    script = "set -euo pipefail\n" + "\n".join(block) + "\n"
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    try:
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        subprocess.run(["treadle", "cluster", "down"], cwd=tmp_path, env=env, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert '"price"' in proc.stdout
    assert "alice: budget 100000, spending rate 4" in proc.stdout  # her set-rate and info
    assert "alice: budget 101000, spending rate 4" in proc.stdout  # the admin's add-budget
    assert (tmp_path / ".treadle/cluster/secrets/alice.key").exists()


@pytest.mark.slow
def test_the_policy_family_examples_work_as_written(tmp_path: Path) -> None:
    """The runtime-partitioning block and the dp command, line by line."""
    lines = block_after("### Runtime partitioning") + block_after("## Dynamic Priority: dp")
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    for line in lines:
        proc = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    assert (tmp_path / "out" / "uwfq-P" / "report.html").exists()
    assert (tmp_path / "out" / "dp" / "summary.json").exists()
