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

        def rows(table: str) -> list[Any]:
            return list(browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr"))

        def running_shown(d: Any) -> bool:
            states = [r.find_elements(By.CSS_SELECTOR, "td")[4].text for r in rows("apps")]
            return "RUNNING" in states and len(rows("nodes")) == 4

        wait.until(running_shown)

        def progress_shown(d: Any) -> bool:
            cells = [r.find_elements(By.CSS_SELECTOR, "td")[5].text for r in rows("apps")]
            return any(c not in ("0%", "") for c in cells)

        wait.until(progress_shown)

        def chart_points(d: Any) -> dict[str, list[tuple[float, float]]]:
            out = {}
            for line in d.find_elements(By.CSS_SELECTOR, "#util-chart polyline.series"):
                pts = [
                    tuple(map(float, p.split(","))) for p in line.get_attribute("points").split()
                ]
                out[line.get_attribute("data-resource")] = pts
            return out

        # The chart: one line per resource, over a few samples, above the zero line.
        wait.until(lambda d: len(chart_points(d).get("vcores", [])) >= 3)
        lines = chart_points(browser)
        assert set(lines) == {"memory_mb", "vcores"}
        zero = float(browser.find_element(By.ID, "util-chart").get_attribute("data-zero-y"))
        assert any(y < zero - 1 for _, y in lines["vcores"]), "utilization above 0 at some point"
        legend = browser.find_element(By.ID, "util-legend").text
        assert "vcores" in legend
        assert "%" in legend

        # The applications table: the workload's jobs, with state and progress.
        jobs = {j.name for j in load_workload("demo").jobs}
        apps = []
        for r in rows("apps"):
            cells = [c.text for c in r.find_elements(By.CSS_SELECTOR, "td")]
            apps.append(cells)
            assert re.fullmatch(r"application_\d+", cells[0])
            assert cells[1] in jobs
            assert cells[3] in {"etl", "analytics", "adhoc"}
            assert cells[4] in {"ACCEPTED", "RUNNING", "FINISHED"}
            assert re.fullmatch(r"\d+%", cells[5])
        assert any(a[4] == "RUNNING" for a in apps)

        # The queues with their shares, and the nodes.
        queues = {r.get_attribute("data-queue") for r in rows("queues")}
        assert queues == {"root", "etl", "analytics", "adhoc"}
        nodes = {r.find_elements(By.CSS_SELECTOR, "td")[0].text: r.text for r in rows("nodes")}
        assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
        assert all("RUNNING" in text for text in nodes.values())
        summary = browser.find_element(By.ID, "summary").text
        assert "policy drf" in summary
        assert "nodes 4" in summary

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
