"""``SortedGroups`` and ``ByShape`` (``rm.policy.toolkit.tracking``): the ordered indexes
the built-in policies keep between heartbeats, against a naive model that sorts on
every question."""

from __future__ import annotations

import random

import pytest

from rm.policy.toolkit import ByShape, SortedGroups
from treadle.resources import Resources


def test_entries_come_out_in_order_whatever_order_they_were_filed_in() -> None:
    groups: SortedGroups[str, tuple[float, int, str]] = SortedGroups()
    entries = [(2.5, 1, "b"), (0.5, 7, "c"), (2.5, 0, "a"), (1.0, 3, "d")]
    for e in reversed(entries):
        groups.file("q", e)
    assert groups.get("q") == sorted(entries)
    assert groups.first(["q"]) == (0.5, 7, "c")


def test_equal_keys_tie_by_the_next_fields_not_by_filing_order() -> None:
    one: SortedGroups[str, tuple[float, int, str]] = SortedGroups()
    other: SortedGroups[str, tuple[float, int, str]] = SortedGroups()
    tied = [(1.0, seq, f"app{seq}") for seq in range(5)]
    for e in tied:
        one.file("g", e)
    for e in reversed(tied):
        other.file("g", e)
    assert one.get("g") == other.get("g") == tied


def test_first_is_the_smallest_head_among_the_groups_asked_about() -> None:
    groups: SortedGroups[str, tuple[int, str]] = SortedGroups()
    groups.file("a", (5, "x"))
    groups.file("b", (3, "y"))
    groups.file("c", (1, "z"))
    assert groups.first(["a", "b"]) == (3, "y")
    assert groups.first(["a", "missing"]) == (5, "x")
    assert groups.first([]) is None


def test_an_emptied_group_is_dropped_and_comes_back_last() -> None:
    groups: SortedGroups[str, tuple[int, str]] = SortedGroups()
    groups.file("a", (1, "x"))
    groups.file("b", (2, "y"))
    groups.unfile("a", (1, "x"))
    assert list(groups.lists) == ["b"]
    assert groups.get("a") == []
    assert groups.first(["a"]) is None
    groups.file("a", (0, "x"))
    assert list(groups.lists) == ["b", "a"]
    groups.unfile("b", (2, "y"))
    groups.unfile("a", (0, "x"))
    assert not groups


@pytest.mark.parametrize("seed", range(5))
def test_random_filing_matches_a_naive_sort(seed: int) -> None:
    rng = random.Random(seed)
    groups: SortedGroups[int, tuple[float, int]] = SortedGroups()
    naive: dict[int, list[tuple[float, int]]] = {}
    for step in range(2000):
        g = rng.randrange(4)
        filed = naive.get(g, [])
        if filed and rng.random() < 0.45:
            e = rng.choice(filed)
            groups.unfile(g, e)
            filed.remove(e)
            if not filed:
                del naive[g]
        else:
            e = (rng.choice([0.1, 0.5, 0.5, 2.0]), step)  # float keys with many ties
            groups.file(g, e)
            naive.setdefault(g, []).append(e)
        assert {k: groups.get(k) for k in groups.lists} == {k: sorted(v) for k, v in naive.items()}
        asked = rng.sample(range(5), 2)
        heads = [min(naive[k]) for k in asked if k in naive]
        assert groups.first(asked) == (min(heads) if heads else None)


def test_by_shape_moves_an_item_between_shapes_in_one_put() -> None:
    small, big = Resources(vcores=1), Resources(vcores=4)
    index = ByShape()
    index.put("app1", (1, "app1"), (small, big))
    index.put("app2", (2, "app2"), (small,))
    assert index.first(index.fitting(Resources(vcores=2))) == (1, "app1")
    index.put("app1", (1, "app1"), (big,))  # it no longer asks for the small shape
    assert index.first(index.fitting(Resources(vcores=2))) == (2, "app2")
    assert index.first(index.fitting(Resources(vcores=8))) == (1, "app1")
    index.put("app1", (3, "app1"), (small,))  # a new key: it moves behind app2
    assert index.get(small) == [(2, "app2"), (3, "app1")]
    assert big not in index.lists
    index.remove("app2")
    index.remove("app2")  # removing what is not filed does nothing
    assert index.get(small) == [(3, "app1")]
    assert len(index) == 1
