"""The documentation site builds with strict warnings (a broken link or anchor, a page
left out of the navigation or a docstring mkdocstrings cannot render fails it), and its
pages hold what they are generated from: the event schema, the traces' catalogue, the
commands' help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from treadle.events import schema_markdown
from treadle.importers.catalogue import TRACES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_docs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]

    def page(name: str) -> str:
        return (site / name / "index.html").read_text()

    assert "--8<--" not in "".join(p.read_text() for p in site.rglob("*.html"))
    assert "SrptPolicy" in page("plugins")
    traces = page("traces")
    for trace in TRACES:  # every public trace's files with their checksums
        for path, digest in trace.files:
            assert f"<code>{path}</code>" in traces, path
            assert digest in traces, path
    assert "Ambiguities" in page("policies/stage-schedulers")
    results = page("results")
    for line in schema_markdown().splitlines()[2:]:  # every event type of the schema
        event = line.split("|")[1].strip().strip("`")
        assert f"<code>{event}</code>" in results, event
    assert "--asks" in page("cli")
    assert "treadle cluster up" in page("cli")
    assert "Placement" in page("api/policy")  # the API reference from the docstrings
    assert "Jain" in page("metrics")
    assert not (site / "hooks.py").exists()
