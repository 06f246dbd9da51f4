"""report.html as a user gets it: `treadle compare` writes it, `treadle report DIR` builds it
again, and the page holds every section with nothing to fetch from the network."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from treadle.event_columns import read_events

TREADLE = [sys.executable, "-m", "treadle.cli"]


def treadle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + list(args), capture_output=True, text=True, timeout=600)


class Page(HTMLParser):
    """The parts of the page the tests look at."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.links: list[str] = []  # every src and href
        self.panels: dict[str, list[str]] = {}  # panel kind -> policies, in order
        self.images: list[str] = []
        self.param_rows: dict[str, str] = {}  # policy -> the text of its parameters row
        self.tables: list[str] = []
        self.run_params = ""  # the text of the run parameters table
        self._row: str | None = None
        self._done_run = False
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key):
                self.links.append(a[key] or "")
        if tag == "section" and a.get("id"):
            self.sections.append(a["id"] or "")
        if tag == "table" and a.get("id"):
            self.tables.append(a["id"] or "")
            self._in_params = a["id"] == "policy-parameters"
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "figure" and "panel" in (a.get("class") or "").split():
            kind = (a.get("class") or "").split()[1]
            self.panels.setdefault(kind, []).append(a.get("data-policy") or "")
        if tag == "tr" and getattr(self, "_in_params", False) and a.get("data-policy"):
            self._row = a["data-policy"]
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row is not None:
            self.param_rows[self._row] = " ".join(self._text)
            self._row = None
        if tag == "table":
            self._in_params = False
            self._done_run = bool(self.tables and self.tables[-1] == "run-parameters")

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self._text.append(data)
        if self.tables and self.tables[-1] == "run-parameters" and not self._done_run:
            self.run_params += data + " "


ALWAYS = ["parameters", "results", "groups", "per-user", "per-queue", "improvement", "cdfs"]
ALWAYS += ["jain", "utilization", "timeline", "vs-reference"]


@pytest.fixture(scope="module")
def demo_all(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "all"
    proc = treadle("compare", "demo", "--policies", "all", "--workers", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def _policies() -> list[str]:
    proc = treadle("policies", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    entries = data["policies"] if isinstance(data, dict) else data
    return sorted(e["name"] if isinstance(e, dict) else str(e) for e in entries)


def test_compare_all_writes_a_self_contained_page(demo_all: Path) -> None:
    assert (demo_all / "report.md").exists()  # the Markdown report stays
    page = Page((demo_all / "report.html").read_text(encoding="utf-8"))
    policies = list(json.loads((demo_all / "report_inputs.json").read_text())["policies"])
    assert sorted(policies) == _policies()

    for sid in ALWAYS:
        assert sid in page.sections, sid
    # DP accounts come with the dp policy (its runs log dp_account books); a simulated
    # demo has no live runs and no paper-compat figures.
    # and estimates with gs (it logs job_estimated when it sizes a wide job).
    assert ("dp-accounts" in page.sections) == ("dp" in policies)
    assert ("estimation" in page.sections) == ("gs" in policies)
    for sid in ("fidelity", "paper-compat"):
        assert sid not in page.sections, sid
    text = (demo_all / "report.html").read_text(encoding="utf-8")
    # gs's oracle estimates are exact: the section is one line saying so, no chart.
    assert "estimation-table" not in page.tables
    assert "Left out: every estimate of gs is the job&#x27;s exact size" in text
    assert "dp-table" in page.tables  # the demo's queues have budgets
    assert 'class="note identical"' not in text  # the demo separates every policy
    # 14 policies overlap in one CDF: each gets its own JCT CDF panel too.
    assert page.panels["jct-cdf"] == policies

    # Offline: every image is embedded, every link is a fragment of the page itself.
    assert page.images
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    assert all(link.startswith(("data:", "#")) for link in page.links), page.links
    assert not any("http://" in link or "https://" in link for link in page.links)

    # One panel per policy, in the comparison's order, for each per-policy chart.
    for kind in ("utilization", "jain", "timeline"):
        assert page.panels[kind] == policies, kind

    # Every policy's resolved parameters (defaults included), ask strategy, estimator.
    inputs = json.loads((demo_all / "report_inputs.json").read_text())["parameters"]
    assert set(page.param_rows) == set(policies)
    for name in policies:
        row = page.param_rows[name]
        for key in inputs[name]["params"]:
            assert key in row, (name, key)
        assert inputs[name]["asks"]["name"] in row
    assert "across" in page.param_rows["drf"]  # a default no --set named
    assert "altruistic" in page.param_rows["carbyne"]
    assert "oracle" in page.param_rows["gs"]  # gs's estimator
    assert "phase seed" in page.run_params  # the run options, the same for every policy
    assert "demo" in page.run_params  # the workload
    for table in ("run-parameters", "policy-parameters", "results-table", "dvr-dsr"):
        assert table in page.tables


def test_report_command_rebuilds_the_same_results(demo_all: Path, tmp_path: Path) -> None:
    before = {f: (demo_all / f).read_bytes() for f in ("comparison.json", "report.md")}
    (demo_all / "report.html").unlink()
    proc = treadle("report", str(demo_all))
    assert proc.returncode == 0, proc.stderr
    assert (demo_all / "report.html").exists()
    for f, data in before.items():
        assert (demo_all / f).read_bytes() == data, f

    proc = treadle("report", str(tmp_path / "nowhere"))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "nowhere" in proc.stderr


def _dp_records(queues: list[str], t0: float, t1: float) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    steps = 10
    for i in range(steps + 1):
        t = t0 + (t1 - t0) * i / steps
        for k, q in enumerate(queues):
            out.append(
                {
                    "t": t,
                    "event": "dp_account",
                    "queue": q,
                    "price": 1.0 + 0.1 * i + k,
                    "budget": 100.0 * (k + 1) - 5.0 * i,
                    "spending_rate": 1.0 + k,
                    "share": 0.3,
                    "used": 0.2,
                    "pending": 3 - i % 3,
                    "charged": 2.5,
                }
            )
    return out


def _append(log: Path, extra: list[dict[str, object]]) -> None:
    """Add records to a run's log as a run that logs them would (a Parquet log gets their
    fields as columns, null on the other rows)."""
    if log.suffix == ".jsonl":
        with log.open("a", encoding="utf-8") as f:
            for r in extra:
                f.write(json.dumps(r) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(log)
    for r in extra:
        if r["event"] == "job_estimated":
            r["queue"] = str(r["queue"])  # one column, one type
    keys = list(dict.fromkeys(k for r in extra for k in r))
    rows = pa.table({k: [r.get(k) for r in extra] for k in keys})
    merged = pa.concat_tables([table, rows], promote_options="default")
    pq.write_table(merged, log)


@pytest.mark.parametrize("events", ["jsonl", "parquet"])
def test_dp_and_estimation_sections_appear_with_their_records(tmp_path: Path, events: str) -> None:
    out = tmp_path / "dp"
    proc = treadle("compare", "demo", "--policies", "fifo,drf", "--events", events,
                   "--no-slowdown", "--workers", "1", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    assert "dp-accounts" not in page.sections
    assert "estimation" not in page.sections
    assert "vs-reference" not in page.sections  # ujf, the default reference, is not compared

    log = out / "drf" / f"events.{events}"
    records = read_events(log)
    jobs = [r for r in records if r["event"] == "job_submitted"]
    t_end = max(r["t"] for r in records)
    extra = _dp_records(sorted({r["queue"] for r in jobs}), 0.0, t_end)
    extra += [
        {"t": r["t"] + 1.0, "event": "job_estimated", "job": r["job"], "estimate_s": 100.0,
         "queue": 1, "sr": 0.03, "pilots": 1}
        for r in jobs[:5]
    ]  # fmt: skip
    _append(log, extra)

    proc = treadle("report", str(out))
    assert proc.returncode == 0, proc.stderr
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    assert "dp-accounts" in page.sections
    assert "estimation" in page.sections
    assert page.panels["dp"] == ["drf"] * 3  # budget, price, per-queue JCT; fifo has none
    assert "dp-table" in page.tables
    assert "estimation-table" in page.tables
    text = (out / "report.html").read_text(encoding="utf-8")
    # drf's estimation row: 5 estimated jobs, 5 with an observed size.
    assert '<tr data-policy="drf"><td>drf</td><td class="n">5</td><td class="n">5</td>' in text


def test_jain_over_time_agrees_with_the_results_table(demo_all: Path) -> None:
    """The plotted windows average to the summary's Jain means (same windows, weights)."""
    import math

    from treadle.report.logdata import read_extras

    weights = json.loads((demo_all / "report_inputs.json").read_text())["user_weights"]
    for name in ("fifo", "drf", "uwfq"):
        summary = json.loads((demo_all / name / "summary.json").read_text())
        jain = read_extras(demo_all / name, weights).jain
        assert jain is not None
        assert jain.window_s == summary["jain_window_s"]
        for series, key in ((jain.users, "jain_users"), (jain.jobs, "jain_jobs")):
            values = [v for v in series.tolist() if not math.isnan(v)]
            assert len(values) == summary[f"{key}_windows"]
            assert sum(values) / len(values) == pytest.approx(summary[f"{key}_mean"], abs=1e-6)


def test_sections_without_meaning_are_left_out_and_ties_with_the_baseline_flagged(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tiny"
    proc = treadle("compare", "tiny", "--policies", "fifo,dp,gs", "--workers", "1",
                   "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (out / "report.html").read_text(encoding="utf-8")
    page = Page(text)
    assert "dp-accounts" in page.sections
    assert "dp-table" not in page.tables
    assert "Left out: no queue has a budget" in text
    assert "dp" not in page.panels.get("dp", [])  # no flat budget and price charts
    md = (out / "report.md").read_text(encoding="utf-8")
    for name in ("dp", "gs"):
        assert f"- {name}: every job's JCT equals fifo's" in md
        assert f'<p class="note identical">{name}: every job' in text
    assert "likely reason: no queue has a budget and spending_rate" in md
