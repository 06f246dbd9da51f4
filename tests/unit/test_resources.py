"""The RM's running totals (``Accumulator``) agree with vector arithmetic."""

from __future__ import annotations

import random

from treadle.resources import Accumulator, Resources, add_to_all, sub_from_all


def test_an_accumulator_takes_a_dimension_first_seen_after_it_was_made() -> None:
    acc = Accumulator(Resources(vcores=4))
    other = Accumulator()
    late = Resources(vcores=1, fresh_dimension_a=2.5)
    assert not acc.covers(late)
    acc.add(late)
    add_to_all((other,), late)
    assert acc.value == Resources(vcores=5, fresh_dimension_a=2.5)
    assert other.value == late
    assert acc.covers(late)
    acc.sub(late)
    sub_from_all((other,), late)
    assert acc.value == Resources(vcores=4)
    assert other.value.is_zero()


def test_float_dust_leaves_exact_zero_and_a_freed_node_equals_its_capacity() -> None:
    cap = Resources(vcores=16, memory_mb=65536)
    free = Accumulator(cap)
    task = Resources(vcores=0.1, memory_mb=0.3)
    for _ in range(10):
        free.sub(task)
    for _ in range(10):
        free.add(task)
    assert free.value == cap
    used = Accumulator()
    for _ in range(10):
        used.add(task)
    for _ in range(10):
        used.sub(task)
    assert used.value.is_zero()
    assert "vcores" not in used.value


def test_books_equal_the_sums_of_what_was_added_and_taken() -> None:
    rng = random.Random(7)
    shapes = [
        Resources(vcores=1, memory_mb=2048),
        Resources(vcores=2, memory_mb=8192),
        Resources(vcores=1, memory_mb=1024, gpu=1),
    ]
    books = (Accumulator(), Accumulator(), Accumulator())
    held: list[Resources] = []
    for _ in range(500):
        if held and rng.random() < 0.45:
            r = held.pop(rng.randrange(len(held)))
            sub_from_all(books, r)
        else:
            r = rng.choice(shapes)
            held.append(r)
            add_to_all(books, r)
        want = Resources()
        for h in held:
            want = want + h
        for acc in books:
            assert acc.value == want
            assert list(acc.value) == sorted(acc.value)  # dimensions by name


def test_vectors_and_books_cross_processes_by_name() -> None:
    """A pickled vector or book is rebuilt by dimension name, as another process numbers
    its dimensions in the order it meets them."""
    import pickle

    import treadle.resources as res

    r = Resources(vcores=2, memory_mb=4096, pickled_dimension_b=1)
    acc = Accumulator(r)
    acc.add(r)
    res._indexed(r)
    r2 = pickle.loads(pickle.dumps(r))
    assert r2 == r
    assert r2._iv is None
    acc2 = pickle.loads(pickle.dumps(acc))
    assert acc2.value == r * 2


def test_dominant_share_with_is_the_dominant_share_of_the_sum() -> None:
    rng = random.Random(7)
    cap = Resources(vcores=24, memory_mb=98304, gpu=3)
    for _ in range(200):
        a = Resources(vcores=rng.randint(0, 9), memory_mb=rng.random() * 9000)
        b = Resources(memory_mb=rng.random() * 9000, gpu=rng.randint(0, 2), disk=5)
        assert a.dominant_share_with(b, cap) == (a + b).dominant_share(cap)
