"""``treadle`` as a user runs it, in a process of its own, for the tests of its commands."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def treadle(
    *args: str, cwd: Path = ROOT, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m treadle.cli ARGS`` in ``cwd``; its exit status, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "treadle.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
