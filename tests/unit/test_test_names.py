"""Test modules are imported by their basename (pytest's default "prepend" import mode,
no packages under tests/unit or tests/integration): two test files of one name in the
collected folders stop the whole session at collection, so none may share a name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECTED = ("tests/unit", "tests/integration", "tests/fidelity", "tests/e2e")


def test_no_two_collected_test_modules_share_a_basename() -> None:
    names = Counter(p.name for d in COLLECTED for p in (ROOT / d).rglob("test_*.py"))
    assert sorted(n for n, k in names.items() if k > 1) == []
