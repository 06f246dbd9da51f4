"""bench_uwfq's knobs for measuring the gaps to the paper: what they set, and bad values
as one line and exit 2 before any simulation runs."""

from __future__ import annotations

import pytest

from tests.benchmarks import bench_uwfq
from treadle.importers.uwfq import JOB_CLASSES


def test_slot_scale_and_options_reach_the_importer() -> None:
    opts = bench_uwfq.importer_options(0.02, {"driver_slots": 4, "skew": False}, 0.5)
    assert opts.heartbeat_s == 0.02
    assert opts.driver_slots == 4
    assert opts.skew is False
    assert opts.classes["Loop100"].slot_s == pytest.approx(JOB_CLASSES["Loop100"].slot_s / 2)
    assert opts.classes["Loop100"].idle_s == JOB_CLASSES["Loop100"].idle_s


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--option", "nodez=3"], "nodez"),
        (["--option", "nodes=x"], "nodes"),
        (["--option", "skew=1"], "skew"),
        (["--option", "driver_slots=0"], "driver_slots"),
        (["--slot-scale", "0"], "--slot-scale"),
        (["--set", "spark-fair.tie=bogus"], "tie"),
        (["--set", "fifo.x=1"], "fifo"),
    ],
)
def test_bad_knobs_are_one_line_and_exit_2(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_uwfq.main(["--only", "s2", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1
    assert names in lines[0]
