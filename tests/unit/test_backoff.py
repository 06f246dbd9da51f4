"""The retry schedule every client loop shares (treadle.live.backoff, issue 26 item 4)."""

from __future__ import annotations

import random

import pytest

from treadle.live.backoff import Backoff


def test_delays_double_up_to_the_cap_and_a_success_starts_over() -> None:
    b = Backoff(0.1, 2.0, jitter=0.0)
    assert [round(b.next(), 6) for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    assert b.failures == 8
    b.reset()
    assert b.next() == pytest.approx(0.1)


def test_jitter_only_shortens_a_delay_and_a_seeded_rng_repeats_it() -> None:
    def schedule(seed: int) -> list[float]:
        b = Backoff(0.1, 2.0, jitter=0.5, rng=random.Random(seed))
        return [b.next() for _ in range(40)]

    one = schedule(7)
    assert one == schedule(7)
    assert one != schedule(8)
    full = [min(2.0, 0.1 * 2**n) for n in range(40)]
    assert all(f * 0.5 <= d <= f for d, f in zip(one, full, strict=True))
    assert max(one) <= 2.0
    assert len({round(d, 9) for d in one[10:]}) > 1  # at the cap, spread apart


def test_a_long_outage_stays_at_the_cap() -> None:
    b = Backoff(1.0, 30.0, factor=10.0, jitter=0.0)
    assert [b.next() for _ in range(2000)][-1] == 30.0


@pytest.mark.parametrize(
    ("base", "cap", "factor", "jitter"),
    [(0.0, 1.0, 2.0, 0.1), (2.0, 1.0, 2.0, 0.1), (0.1, 1.0, 0.5, 0.1), (0.1, 1.0, 2.0, 1.0)],
)
def test_a_bad_schedule_is_refused(base: float, cap: float, factor: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(base, cap, factor=factor, jitter=jitter)
