"""docs/testing-against-treadle.md shows only code that runs: each of its Python blocks,
marked ``<!-- shown from: PATH -->``, is a verbatim part of that test file, and those
files run (the REST client's here; treadle-lifo's in test_thirdparty_plugin.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.inner_pytest import run_pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "testing-against-treadle.md"
SHOWN = re.compile(r"<!-- shown from: (?P<path>\S+) -->\n```python\n(?P<code>.*?)```", re.S)
REST_EXAMPLE = ROOT / "tests" / "plugin_examples" / "test_rest_client.py"


def test_every_python_block_is_part_of_a_test_file_that_runs() -> None:
    text = PAGE.read_text()
    shown = list(SHOWN.finditer(text))
    assert text.count("```python") == len(shown), "a Python block without its source"
    sources = {m["path"] for m in shown}
    assert sources == {
        "tests/plugin_examples/test_rest_client.py",
        "tests/thirdparty/treadle-lifo/tests/test_lifo.py",
    }
    for m in shown:
        source = (ROOT / m["path"]).read_text()
        assert m["code"] in source, f"the block shown from {m['path']} is not in that file"


def test_the_rest_client_example_passes(tmp_path: Path) -> None:
    shutil.copy(REST_EXAMPLE, tmp_path)
    inner = run_pytest(["-q", REST_EXAMPLE.name], tmp_path)
    assert inner.returncode == 0, inner.stdout + inner.stderr
    assert "3 passed" in inner.stdout
