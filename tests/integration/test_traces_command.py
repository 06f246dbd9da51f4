"""``treadle traces``: the catalogue of public traces, and ``--check`` of a directory: the
test suite's own traces (``$TREADLE_TRACES``, ``../shared/traces``) are every catalogued
file, intact; a changed file fails, a missing one is only listed, a wrong directory is one
line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from treadle.cli.app import app
from treadle.importers.catalogue import TRACES, TRACES_ENV

SHARED_TRACES = Path(os.environ[TRACES_ENV])
needs_traces = pytest.mark.skipif(
    not SHARED_TRACES.is_dir(), reason=f"{SHARED_TRACES} is absent (the public traces)"
)


def traces(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["traces", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_list_names_every_trace_with_its_source_and_licence() -> None:
    code, stdout, _ = traces()
    assert code == 0
    for t in TRACES:
        assert f"{t.name}/" in stdout
        assert f"licence: {t.licence}" in stdout
    rows = json.loads(traces("--json")[1])
    assert {r["name"] for r in rows} == {t.name for t in TRACES}
    assert all(len(f["sha256"]) == 64 for r in rows for f in r["files"])


@needs_traces
def test_the_suites_traces_are_every_catalogued_file_intact() -> None:
    code, stdout, _ = traces("--check")
    total = sum(len(t.files) for t in TRACES)
    assert code == 0, stdout
    assert (
        stdout.strip()
        == f"{SHARED_TRACES}: {total} of {total} files present and intact ({total} present)"
    )
    on_disk = {
        str(p.relative_to(SHARED_TRACES))
        for p in SHARED_TRACES.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert on_disk == {rel for t in TRACES for rel, _ in t.files}


@needs_traces
def test_a_changed_file_fails_and_a_missing_one_is_listed(tmp_path: Path) -> None:
    (tmp_path / "sls").mkdir()
    shutil.copy(SHARED_TRACES / "sls" / "inputsls.json", tmp_path / "sls")
    (tmp_path / "sls" / "nodes.json").write_text("{}\n")
    code, stdout, stderr = traces("--check", "--dir", str(tmp_path))
    assert code == 1
    assert "missing: swim/FB-2009_samples_24_times_1hr_0.tsv" in stdout
    assert "differs: sls/nodes.json" in stdout
    assert "1 of 41 files present and intact (2 present)" in stdout
    assert stderr == "error: 1 file(s) differ from the published trace: sls/nodes.json\n"
    (tmp_path / "sls" / "nodes.json").unlink()
    assert traces("--check", "--dir", str(tmp_path))[0] == 0  # partly filled is fine


def test_no_directory_or_a_wrong_one_is_one_line(tmp_path: Path) -> None:
    env = {TRACES_ENV: ""}
    code, _, stderr = traces("--check", env=env)
    assert (code, stderr) == (
        2,
        "error: TREADLE_TRACES: not set: give --dir DIR or set it to your traces directory\n",
    )
    code, _, stderr = traces("--check", env={TRACES_ENV: str(tmp_path / "nope")})
    assert (code, stderr) == (2, f"error: TREADLE_TRACES={tmp_path / 'nope'}: not a directory\n")
