"""Running a pytest session of its own on some test files (treadle's pytest plugin's
tests, the third-party example's, the docs' examples), as a user of the plugin would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path

PLUGIN = "treadle.testing.plugin"


def plugin_args() -> list[str]:
    """``-p treadle.testing.plugin`` unless the installed treadle registers it (entry
    point ``pytest11``), as a released one does: then pytest loads it by itself, and
    naming it again would register it twice."""
    if any(ep.value == PLUGIN for ep in entry_points(group="pytest11")):
        return []
    return ["-p", PLUGIN]


def run_pytest(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``cwd`` (its own rootdir: no ini file of treadle's
    applies), the plugin loaded, no cache written."""
    argv = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider",
            "--rootdir", str(cwd), *args]  # fmt: skip
    return subprocess.run(
        argv, cwd=cwd, env=dict(env if env is not None else os.environ),
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
