"""The registry reads each entry-point group once per process; ``reset_cache`` forgets."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from treadle import registry
from treadle.errors import PluginError
from treadle.study.runner import RunOptions, alone_jcts
from treadle.workload import load_workload


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The groups whose entry points were read from package metadata, in order."""
    seen: list[str] = []
    real = registry.entry_points

    def counting(**kw: Any) -> Any:
        seen.append(kw["group"])
        return real(**kw)

    registry.reset_cache()
    monkeypatch.setattr(registry, "entry_points", counting)
    yield seen
    registry.reset_cache()


def test_each_group_is_read_once(reads: list[str]) -> None:
    for _ in range(5):
        registry.build("policies", "fifo")
        registry.factory("asks", "greedy")()
        assert "fifo" in registry.discover("policies")
    assert sorted(reads) == ["treadle.asks", "treadle.policies"]
    registry.reset_cache()
    registry.lookup("policies", "fifo")
    assert reads.count("treadle.policies") == 2


def test_discover_hands_out_copies(reads: list[str]) -> None:
    registry.discover("policies").clear()
    assert "fifo" in registry.discover("policies")


def test_entry_points_given_bypass_the_cache(reads: list[str]) -> None:
    ep = EntryPoint("mine", "tests:Mine", "treadle.policies")
    assert list(registry.discover("policies", [ep])) == ["mine"]
    assert registry.lookup("policies", "mine", [ep]).value == "tests:Mine"
    assert "mine" not in registry.discover("policies")
    with pytest.raises(PluginError, match="unknown policy 'mine'"):
        registry.lookup("policies", "mine")


def test_reference_runs_read_no_entry_points(reads: list[str]) -> None:
    wl = load_workload("demo")
    registry.lookup("policies", "fifo")
    registry.lookup("asks", "greedy")
    before = len(reads)
    alone_jcts(wl, RunOptions(alone_cache=False), workers=1)
    assert len(reads) == before
