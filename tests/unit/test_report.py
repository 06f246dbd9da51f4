"""The comparison report: comparison.json, report.md and the two plots."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from treadle.metrics import RunMetrics, analyze
from treadle.report.markdown import write_comparison
from treadle.report.series import plot_points, resample, thinned

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def tiny_log(*, j2_start: float = 10.0) -> list[dict[str, Any]]:
    """The log of test_metrics.tiny_log, built compactly (2 nodes of 4 vcores / 8 GiB).

    (job, name, user, submit, [(container, alloc, end, vcores, memory_mb, end event)])
    """
    fin, rel = "container_finished", "container_released"
    jobs = [
        ("j1", "wordcount", "alice", 0.0, [("c1", 0.0, 10.0, 4, 4096, fin)]),
        ("j2", "grep", "alice", 5.0, [("c2", j2_start, j2_start + 10, 2, 8192, fin)]),
        (
            "j3",
            "sort",
            "bob",
            10.0,
            [("c3", 10.0, 30.0, 4, 2048, fin), ("c4", 12.0, 14.0, 1, 1024, rel)],
        ),
    ]
    recs: list[dict[str, Any]] = [
        {"t": 0.0, "event": "run_started", "policy": "fifo", "workload": "tiny", "mode": "sim",
         "seed": 7, "dilation": 1.0, "heartbeat_s": 1.0, "nodes": 2,
         "capacity": {"vcores": 8, "memory_mb": 16384}},
    ]  # fmt: skip
    for job, name, user, submit, containers in jobs:
        recs.append({"t": submit, "event": "job_submitted", "job": job, "name": name,
                     "user": user, "queue": "default", "tasks": len(containers),
                     "alone_jct_s": 20.0 if job == "j3" else 10.0})  # fmt: skip
        recs.append({"t": containers[0][1], "event": "job_started", "job": job, "user": user})
        for cid, alloc, end, vcores, mem, kind in containers:
            res = {"vcores": vcores, "memory_mb": mem}
            recs.append({"t": alloc, "event": "container_allocated", "job": job,
                         "container": cid, "node": "n1", "resources": res})  # fmt: skip
            recs.append({"t": end, "event": kind, "job": job, "container": cid, "node": "n1"})
        finish = max(c[2] for c in containers if c[5] == fin)
        recs.append({"t": finish, "event": "job_finished", "job": job, "status": "SUCCEEDED"})
    return recs


def runs() -> dict[str, RunMetrics]:
    # drf starts j2 at 7.5 instead of 10: j2's JCT drops from 15 to 12.5.
    return {
        "fifo": analyze(tiny_log(), policy="fifo"),
        "drf": analyze(tiny_log(j2_start=7.5), policy="drf"),
    }


def test_write_comparison_writes_all_files(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    path = write_comparison(runs(), out, baseline="fifo", title="Tiny comparison")
    assert path == out / "report.md"
    for png in ("jct_cdf.png", "utilization.png"):
        assert (out / png).read_bytes()[:8] == PNG_MAGIC

    comparison = json.loads((out / "comparison.json").read_text())
    assert set(comparison) == {"fifo", "drf"}
    assert "vs_baseline" not in comparison["fifo"]
    vs = comparison["drf"]["vs_baseline"]
    assert vs["baseline"] == "fifo"
    assert vs["per_job"] == {"grep": 1.2, "sort": 1.0, "wordcount": 1.0}
    assert vs["p50"] == 1.0
    assert vs["mean"] == pytest.approx(3.2 / 3, abs=1e-6)
    assert comparison["fifo"]["mean_jct_s"] == 15.0
    assert comparison["drf"]["policy"] == "drf"

    md = path.read_text()
    assert md.startswith("# Tiny comparison\n")
    assert "](jct_cdf.png)" in md
    assert "](utilization.png)" in md
    assert "## Factor of improvement vs fifo" in md
    assert "| tiny |" in md  # workload, shared by both runs
    rows: dict[str, str] = {}  # the first table naming the policies: the results
    for m in re.finditer(r"^\| (fifo|drf) \|.*$", md, re.M):
        rows.setdefault(m.group(1), m.group(0))
    assert set(rows) == {"fifo", "drf"}
    assert "| 15.00 |" in rows["fifo"]  # mean JCT
    assert "59.2%" in rows["fifo"]  # vcores utilization


def test_write_comparison_without_baseline(tmp_path: Path) -> None:
    write_comparison(runs(), tmp_path)
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert all("vs_baseline" not in s for s in comparison.values())
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Policy comparison\n")
    assert "Factor of improvement" not in md


def test_figures_against_a_reference(tmp_path: Path) -> None:
    write_comparison(runs(), tmp_path, reference="fifo", paper_compat=True)
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert "vs_reference" not in comparison["fifo"]
    vs = comparison["drf"]["vs_reference"]
    assert vs["reference"] == "fifo"
    assert vs["jobs"] == vs["violations"] + vs["slack"] == 3
    assert set(vs["user_rt_vs_reference"]) == set(comparison["drf"]["per_user"])
    assert comparison["drf"]["paper_compat"]["vs_reference"]["jobs"] == 3
    assert set(comparison["fifo"]["jct_groups_s"]) == {"0-80%", "80-95%", "95-100%"}
    md = (tmp_path / "report.md").read_text()
    assert "## Response-time groups and users" in md
    assert "## Deadlines and users vs fifo" in md
    assert "| fifo | reference |" in md
    assert "(paper_compat)" in md


def test_missing_reference_is_noted_and_its_figures_omitted(tmp_path: Path) -> None:
    write_comparison(runs(), tmp_path, reference="ujf")
    assert "reference 'ujf' is not among the runs" in (tmp_path / "report.md").read_text()
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert all("vs_reference" not in s for s in comparison.values())


def test_missing_baseline_is_noted_not_raised(tmp_path: Path) -> None:
    write_comparison(runs(), tmp_path, baseline="ujf")
    assert "'ujf' is not among the runs" in (tmp_path / "report.md").read_text()
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert all("vs_baseline" not in s for s in comparison.values())


def test_differing_parameters_are_listed_per_policy(tmp_path: Path) -> None:
    other = tiny_log()
    other[0] = {**other[0], "seed": 8}
    write_comparison({"fifo": analyze(tiny_log()), "drf": analyze(other, policy="drf")}, tmp_path)
    assert "| seed | fifo: 7; drf: 8 |" in (tmp_path / "report.md").read_text()


def test_comparison_is_byte_stable(tmp_path: Path) -> None:
    write_comparison(runs(), tmp_path / "a", baseline="fifo")
    write_comparison(runs(), tmp_path / "b", baseline="fifo")
    for name in ("comparison.json", "report.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_runs_without_finished_jobs_or_capacity_still_plot(tmp_path: Path) -> None:
    recs: list[dict[str, Any]] = [
        {"t": 0, "event": "job_submitted", "job": "a", "name": "a", "user": "u"},
    ]
    write_comparison({"fifo": analyze(recs, policy="fifo")}, tmp_path, baseline="fifo")
    assert (tmp_path / "jct_cdf.png").read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "utilization.png").read_bytes()[:8] == PNG_MAGIC
    assert "No other policy to compare." in (tmp_path / "report.md").read_text()


def test_wide_jct_range_and_long_series_plot(tmp_path: Path) -> None:
    recs: list[dict[str, Any]] = [{"t": 0, "event": "run_started", "capacity": {"vcores": 4}}]
    for i in range(1500):  # JCTs from 1 s to 1500 s: log x; 3000 utilization points
        job = f"j{i}"
        recs += [
            {"t": i, "event": "job_submitted", "job": job, "name": job, "user": f"u{i % 3}"},
            {"t": i, "event": "container_allocated", "job": job, "container": "c",
             "resources": {"vcores": 1}},
            {"t": i + 0.5, "event": "container_finished", "job": job, "container": "c"},
            {"t": 2 * i + 1, "event": "job_finished", "job": job, "status": "SUCCEEDED"},
        ]  # fmt: skip
    m = analyze(recs, policy="fifo")
    assert len(m.utilization["vcores"]) > 2000
    write_comparison({"fifo": m}, tmp_path)
    assert (tmp_path / "utilization.png").read_bytes()[:8] == PNG_MAGIC
    # What a comparison keeps of a run: the series as the plot draws them, the same plot.
    light = dataclasses.replace(m, utilization=thinned(m.utilization))
    assert len(light.utilization["vcores"]) <= 2000
    for res, series in m.utilization.items():
        assert plot_points(light.utilization[res]) == plot_points(series)
    write_comparison({"fifo": light}, tmp_path / "light")
    for png in ("utilization.png", "jct_cdf.png"):
        assert (tmp_path / "light" / png).read_bytes() == (tmp_path / png).read_bytes()


def test_write_comparison_needs_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no runs"):
        write_comparison({}, tmp_path)


@pytest.mark.parametrize(
    ("series", "bins", "expected"),
    [
        # step series: 1 on [0, 1), 0 on [1, 4); 2 bins of width 2 -> means 0.5 and 0
        ([(0.0, 1.0), (1.0, 0.0), (4.0, 0.0)], 2, ([0.0, 2.0, 4.0], [0.5, 0.0, 0.0])),
        (
            [(0.0, 0.5), (3.0, 1.0), (4.0, 1.0)],
            4,
            ([0.0, 1.0, 2.0, 3.0, 4.0], [0.5] * 3 + [1.0] * 2),
        ),
        ([(5.0, 0.3)], 10, ([5.0], [0.3])),
    ],
)
def test_resample_preserves_time_averages(
    series: list[tuple[float, float]], bins: int, expected: tuple[list[float], list[float]]
) -> None:
    xs, ys = resample(series, bins)
    assert xs == pytest.approx(expected[0])
    assert ys == pytest.approx(expected[1])


def test_policy_styles_tell_twenty_policies_apart() -> None:
    from treadle.report.charts import policy_style

    styles = [policy_style(i) for i in range(20)]
    assert len({s["color"] for s in styles}) == 20
    assert len({(s["color"], s["marker"]) for s in styles}) == 20
    assert all(s["marker"] for s in styles)
