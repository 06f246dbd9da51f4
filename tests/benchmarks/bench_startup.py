"""How long a `treadle` command takes to start: the console script run in a fresh process,
wall and CPU (user + system of the child), the median of ``--runs``, each as a ratio to
the yardstick ``python -c pass`` (the same interpreter) measured in the same run.

Commands: ``treadle --version``, ``treadle --help``, ``treadle validate demo`` and
``treadle sim demo --policy fifo --no-slowdown --out TMP`` (the whole simulation of the
built-in demo workload, 20 jobs). Every command imports ``treadle.cli.app``; what that
imports at the top is paid by all of them, so heavy modules are imported where they
are used (tests/integration/test_cli_startup.py keeps them out of ``--version``/``--help``).

Figures (2-core machine shared with other work, load ~2; median of 5; ``x``: the ratio
to ``python -c pass``, 0.023-0.026 s wall and CPU). Before: main at 8c1324c
(``--treadle /work/main/.venv/bin/treadle``); after: the imports moved into the commands,
the trace readers imported at first use, networkx only for a cycle's error message and
``JobSpec.dag``, structlog only when logging is configured:

    command          before wall / CPU               after wall / CPU
    --version        0.911 s 39.0x / 0.981 s 43.9x   0.159 s 6.2x / 0.158 s 6.8x
    --help           1.008 s 43.2x / 1.071 s 48.0x   0.148 s 5.8x / 0.146 s 6.3x
    validate demo    1.019 s 43.7x / 1.084 s 48.6x   0.330 s 12.9x / 0.326 s 14.1x
    sim demo         1.009 s 43.2x / 1.084 s 48.6x   0.810 s 31.8x / 0.891 s 38.5x

What is left of ``--help``: typer, click and rich.console (~0.06 s of imports) and the
interpreter. ``validate`` adds pydantic (typer's parameter adapters import it), the
workload schema and PyYAML; ``sim`` adds the simulator, the metrics, numpy and pyarrow,
all of which it uses.

Run: ``python -m tests.benchmarks startup [--runs 5] [--treadle PATH]`` (PATH: another
checkout's console script, e.g. ``/work/main/.venv/bin/treadle``, for the "before").
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def median_of(argv: list[str], runs: int) -> tuple[float, float]:
    times = [timed(argv) for _ in range(runs)]
    return statistics.median(w for w, _ in times), statistics.median(c for _, c in times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks startup", description=__doc__)
    ap.add_argument("--runs", type=int, default=5, help="Runs per command (the median counts).")
    ap.add_argument(
        "--treadle",
        type=Path,
        default=Path(sys.executable).parent / "treadle",
        help="The console script to time [default: the one beside this interpreter].",
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    treadle = str(args.treadle)
    python = str(args.treadle.parent / "python")
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "--version": [treadle, "--version"],
            "--help": [treadle, "--help"],
            "validate demo": [treadle, "validate", "demo"],
            "sim demo": [
                *(treadle, "sim", "demo", "--policy", "fifo", "--no-slowdown"),
                *("--out", str(Path(tmp) / "sim")),
            ],
        }
        base_wall, base_cpu = median_of([python, "-c", "pass"], args.runs)
        print(
            f"{treadle}; yardstick `python -c pass`: {base_wall:.3f} s wall, {base_cpu:.3f} s CPU"
        )
        print(f"{'command':<16}{'wall s':>8}{'CPU s':>8}{'wall x':>8}{'CPU x':>8}")
        for name, command in commands.items():
            wall, cpu = median_of(command, args.runs)
            print(
                f"{name:<16}{wall:>8.3f}{cpu:>8.3f}"
                f"{wall / base_wall:>8.1f}{cpu / max(base_cpu, 1e-9):>8.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
