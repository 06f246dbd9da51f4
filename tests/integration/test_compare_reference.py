"""``treadle compare --reference POLICY``: the deadline and per-user figures against a
reference reach comparison.json and the report the same whether the runs go one after
another or to worker processes (they come back as per-job results), and a reference that
is not compared is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import one_line_error, treadle

from treadle.study.compare import SimBackend, compare
from treadle.study.runner import PolicyChoice
from treadle.workload import load_workload

POLICIES = ("fifo", "ujf", "uwfq")


def test_reference_figures_are_the_same_with_workers(tmp_path: Path) -> None:
    wl = load_workload("demo")
    choices = [PolicyChoice(n, {}) for n in POLICIES]
    outs = {}
    for workers in (1, 3):
        out = tmp_path / f"w{workers}"
        compare(wl, choices, out, SimBackend(), workers=workers, paper_compat=True)
        outs[workers] = {n: (out / n).read_bytes() for n in ("comparison.json", "report.md")}
    assert outs[1] == outs[3]
    comparison = json.loads(outs[1]["comparison.json"])
    assert "vs_reference" not in comparison["ujf"]  # the default reference
    for name in ("fifo", "uwfq"):
        vs = comparison[name]["vs_reference"]
        assert vs["reference"] == "ujf"
        assert vs["jobs"] == vs["violations"] + vs["slack"] == comparison[name]["finished"]
        assert set(vs["user_rt_vs_reference"]) == set(comparison[name]["per_user"])
        assert comparison[name]["paper_compat"]["vs_reference"]["reference"] == "ujf"
    report = outs[1]["report.md"].decode()
    assert "## Deadlines and users vs ujf" in report
    assert "| ujf | reference |" in report


def test_a_reference_not_compared_is_one_line(tmp_path: Path) -> None:
    proc = treadle(
        "compare", "tiny", "--policies", "fifo,drf", "--reference", "ujf",
        "--out", str(tmp_path),
    )  # fmt: skip
    line = one_line_error(proc)
    assert "--reference 'ujf'" in line
    assert proc.returncode == 2
