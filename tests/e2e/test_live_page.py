"""The RM's live page in a real browser: Debian's headless Chromium, driven by selenium
through Debian's chromedriver (no browser download), against a ``treadle cluster up``
replaying the demo workload. It checks what a person would see: the sign-in form of a
secured RM, then the utilization chart drawn, the workload's jobs with their state and
progress, the queues and the nodes. The screenshot is kept (its path is printed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from treadle.workload.loading import load_workload
from treadle.yarnids import format_node_id

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CLI = [sys.executable, "-m", "treadle.cli"]


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """No containers here: the e2e conftest's Docker sweep does not apply."""
    return


@pytest.fixture
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        reason = f"needs Debian's chromium and chromium-driver (missing {', '.join(missing)})"
        if os.environ.get("CI"):
            pytest.fail(f"e2e tests must run in CI: {reason}")
        pytest.skip(reason)
    os.environ["SE_OFFLINE"] = "true"  # selenium must not look for a driver to download
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1600"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# One consistent reading of the page: every table's rows, the chart's lines, the legend.
SNAPSHOT_JS = """
const table = (id) => Array.from(document.querySelectorAll('#' + id + ' tbody tr')).map(
  (r) => ({cells: Array.from(r.querySelectorAll('td')).map((c) => c.innerText.trim()),
           text: r.innerText, queue: r.getAttribute('data-queue')}));
const chart = {};
for (const l of document.querySelectorAll('#util-chart polyline.series')) {
  chart[l.getAttribute('data-resource')] = l.getAttribute('points') || '';
}
const el = (id) => document.getElementById(id);
return {apps: table('apps'), nodes: table('nodes'), queues: table('queues'), chart: chart,
        zero_y: el('util-chart').getAttribute('data-zero-y'),
        legend: el('util-legend').innerText, summary: el('summary').innerText};
"""


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_live_page_shows_the_running_workload(
    browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    up = cli(
        ["cluster", "up", "--workload", "demo", "--policy", "drf", "--dilation", "10"], tmp_path
    )
    assert up.returncode == 0, up.stderr
    run = None
    try:
        state = json.loads((tmp_path / ".treadle/cluster/cluster.json").read_text())
        key = (tmp_path / ".treadle/cluster/secrets/treadle.key").read_text().strip()
        run = subprocess.Popen(
            [*CLI, "run", "demo", "--rm", state["rm"], "--out", "out", "--no-slowdown"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        browser.get(state["http"] + "/")
        wait = WebDriverWait(browser, 60, poll_frequency=0.25)

        # A secured RM: the page asks who you are, then signs its requests.
        login = wait.until(lambda d: d.find_element(By.ID, "login"))
        wait.until(lambda d: login.is_displayed())
        browser.find_element(By.ID, "login-key").send_keys(key)
        browser.find_element(By.ID, "login-go").click()

        # The page redraws its tables and chart every poll, so an element found in one
        # WebDriver call may be gone by the next: each check reads the page in one script.
        def page(d: Any) -> dict[str, Any]:
            return d.execute_script(SNAPSHOT_JS)  # type: ignore[no-any-return]

        def running_shown(d: Any) -> bool:
            p = page(d)
            return "RUNNING" in [r["cells"][4] for r in p["apps"]] and len(p["nodes"]) == 4

        wait.until(running_shown)

        def progress_shown(d: Any) -> bool:
            return any(r["cells"][5] not in ("0%", "") for r in page(d)["apps"])

        wait.until(progress_shown)

        # The chart: one line per resource, over a few samples, above the zero line.
        wait.until(lambda d: len(page(d)["chart"].get("vcores", [])) >= 3)
        snap = page(browser)
        lines = {k: [tuple(map(float, p.split(","))) for p in v.split()]
                 for k, v in snap["chart"].items()}  # fmt: skip
        assert set(lines) == {"memory_mb", "vcores"}
        zero = float(snap["zero_y"])
        assert any(y < zero - 1 for _, y in lines["vcores"]), "utilization above 0 at some point"
        assert "vcores" in snap["legend"]
        assert "%" in snap["legend"]

        # The applications table: the workload's jobs, with state and progress.
        jobs = {j.name for j in load_workload("demo").jobs}
        apps = [r["cells"] for r in snap["apps"]]
        for cells in apps:
            assert re.fullmatch(r"application_\d+_\d{4,}", cells[0])
            assert cells[1] in jobs
            assert cells[3] in {"etl", "analytics", "adhoc"}
            assert cells[4] in {"ACCEPTED", "RUNNING", "FINISHED"}
            assert re.fullmatch(r"\d+%", cells[5])
        assert any(a[4] == "RUNNING" for a in apps)

        # The queues with their shares, and the nodes.
        assert {r["queue"] for r in snap["queues"]} == {"root", "etl", "analytics", "adhoc"}
        nodes = {r["cells"][0]: r["text"] for r in snap["nodes"]}
        # As YARN's web UI, the nodes by NodeId (host:port, ``treadle.yarnids``).
        assert sorted(nodes) == [format_node_id(f"node{i}") for i in range(1, 5)]
        assert all("RUNNING" in text for text in nodes.values())
        assert "policy drf" in snap["summary"]
        assert "nodes 4" in snap["summary"]

        shot = tmp_path / "live-page.png"
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        with capsys.disabled():
            print(f"\nlive page screenshot: {shot}")
    finally:
        if run is not None:
            with contextlib.suppress(ProcessLookupError):
                run.kill()
            run.wait(timeout=30)
        down = cli(["cluster", "down"], tmp_path)
        assert down.returncode == 0, down.stderr
