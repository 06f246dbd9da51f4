"""Every command block the docs mark runnable works as written.

A block preceded by ``<!-- runnable ... -->`` in ``docs/**/*.md`` or ``README.md`` runs
as one bash script (``set -euo pipefail``, so lines that share shell variables share
them), with ``treadle`` on the PATH as activating the venv puts it, in a fresh directory
standing for the checkout (``treadle/`` linked in, for ``treadle/workloads/demo.yaml``).
The marker's ``creates=PATH`` names a file the block must leave, ``prints="TEXT"`` a
line its output must hold. Docs blocks get ``$TREADLE_TRACES`` (the suite's traces);
the README's blocks get nothing beside the checkout: its tour runs on built-in
workloads alone. The README's first lines and its size are checked here too.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from treadle.importers.catalogue import TRACES_ENV

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKED = re.compile(r"<!-- runnable(?P<args>[^>]*?)-->\n```(?:sh|bash)\n(?P<body>.*?)```", re.S)
README_MAX_BYTES = 12 * 1024


@dataclass(frozen=True)
class Block:
    page: str
    script: str
    creates: tuple[str, ...] = ()
    prints: tuple[str, ...] = ()


def marked_blocks(path: Path) -> list[Block]:
    out = []
    for m in MARKED.finditer(path.read_text("utf-8")):
        creates, prints = [], []
        for arg in shlex.split(m.group("args")):
            key, _, value = arg.partition("=")
            assert key in ("creates", "prints"), f"{path.name}: bad marker {arg!r}"
            assert value, f"{path.name}: {key}= without a value"
            (creates if key == "creates" else prints).append(value)
        out.append(
            Block(str(path.relative_to(ROOT)), m.group("body"), tuple(creates), tuple(prints))
        )
    return out


DOCS = sorted((ROOT / "docs").rglob("*.md"))
BLOCKS = [b for p in [README, *DOCS] for b in marked_blocks(p)]


def test_the_readme_starts_with_its_two_commands_and_stays_small() -> None:
    text = README.read_text("utf-8")
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first is not None
    lines = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert lines == ["make demo", ". .venv/bin/activate", "treadle --version", "make test"]
    assert len(text.encode("utf-8")) <= README_MAX_BYTES
    assert "../shared" not in text


def test_activating_the_venv_puts_treadle_on_the_path() -> None:
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


def test_every_page_with_commands_has_some_marked_runnable() -> None:
    pages = {b.page for b in BLOCKS}
    for page in ["README.md", "docs/getting-started.md", "docs/traces.md"]:
        assert page in pages, page
    assert len(BLOCKS) >= 8


def test_no_page_points_outside_the_repository() -> None:
    for path in [README, ROOT / "mkdocs.yml", *DOCS]:
        assert "../shared" not in path.read_text("utf-8"), path.name


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{i}" for i, b in enumerate(BLOCKS)])
def test_the_marked_block_works_as_written(tmp_path: Path, block: Block) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "treadle").symlink_to(ROOT / "treadle")
    bin_dir = str(Path(sys.executable).parent)  # what activating the venv does
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    if block.page == "README.md":
        env.pop(TRACES_ENV, None)  # a fresh clone: nothing beside it
    elif not Path(env.get(TRACES_ENV, "")).is_dir() and TRACES_ENV in block.script:
        pytest.skip(f"{TRACES_ENV} is not a directory (the public traces)")
    script = "set -euo pipefail\n" + block.script
    try:
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        if (checkout / ".treadle" / "cluster" / "cluster.json").exists():
            subprocess.run(["treadle", "cluster", "down"], cwd=checkout, env=env, check=False)
    assert proc.returncode == 0, f"{block.page}:\n{block.script}\n{proc.stderr[-3000:]}"
    for path in block.creates:
        assert (checkout / path).exists(), f"{block.page}: {path} was not written"
    for line in block.prints:
        assert line in proc.stdout, f"{block.page}: {line!r} not printed\n{proc.stdout}"
