"""``treadle sim`` on the real SWF, Alibaba 2023, Alibaba 2017 and SWIM traces, read in
place from the suite's traces directory (``../shared/traces`` beside the checkout), each
run to completion; long traces as a bounded prefix (``--limit-jobs``): the full runs are
in docs/traces.md. Without ../shared beside the checkout the tests skip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.treadle_cli import treadle

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
    ),
]


@pytest.mark.parametrize(
    ("trace", "fmt", "limit", "policy"),
    [
        ("swf/NASA-iPSC-1993-3.1-cln.swf.gz", "swf", 1500, "fifo"),
        ("alibaba/openb_pod_list_gpushare40.csv", "alibaba2023", 50, "drf"),
        ("alibaba/batch_task_2017.csv", "alibaba2017", 1000, "fifo"),
        ("swim/FB-2009_samples_24_times_1hr_0_first50jobs.tsv", "swim", None, "fair"),
        ("swim/FB-2010_samples_24_times_1hr_withInputPaths_0.tsv", "swim", 400, "fifo"),
    ],
)
def test_sim_runs_the_real_trace_to_completion(
    tmp_path: Path, trace: str, fmt: str, limit: int | None, policy: str
) -> None:
    args = ["sim", f"../shared/traces/{trace}", "--format", fmt, "--policy", policy]
    args += ["--out", str(tmp_path), "--no-slowdown"]
    if limit is not None:
        args += ["--limit-jobs", str(limit)]
    proc = treadle(*args)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["finished"] == summary["jobs"] > 0
    if limit is not None:
        assert summary["jobs"] == limit
    assert f"{summary['jobs']}/{summary['jobs']} jobs" in proc.stdout


def test_formats_are_inferred_from_the_real_files() -> None:
    from treadle.importers import sniff_format

    assert sniff_format(TRACES / "swf/NASA-iPSC-1993-3.1-cln.swf.gz") == "swf"
    assert sniff_format(TRACES / "alibaba/openb_pod_list_default.csv") == "alibaba2023"
    assert sniff_format(TRACES / "alibaba/batch_task_2017.csv") == "alibaba2017"
    assert sniff_format(TRACES / "swim/FB-2009_samples_24_times_1hr_1.tsv") == "swim"


def test_a_malformed_line_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("; MaxNodes: 2\n1 0 -1 10 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n1 0 -1 ten\n")
    proc = treadle("sim", str(bad), "--policy", "fifo", "--out", str(tmp_path / "o"))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: {bad}: line 3: has 4 fields, expected 18"
