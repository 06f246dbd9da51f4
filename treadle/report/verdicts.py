"""What the report says about results that would mislead if shown bare: a policy whose
every job finished exactly as under the baseline (``identical_to_baseline``), and the
likely reason for the built-in policies that fall back to the baseline's order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Why a built-in policy makes FIFO's decisions, when it does.
_LIKELY = {
    "dp": "no queue has a budget and spending_rate, so dp's NO_FILL pass is empty and its "
    "FILL pass is submission order",
    "gs": "every job's size is below q0_hi_s (1000 task-seconds by default), so every job "
    "is in the first queue, which is FIFO (try --set gs.q0_hi_s=100)",
    "las": "no job attains q0_hi_s (1000 task-seconds by default) of service, so every job "
    "stays in the first queue, which is FIFO (try --set las.q0_hi_s=100)",
}
_GENERIC = "its rule made the baseline's decisions on this workload (nothing to tell apart)"


def identical_to_baseline(foi: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The policies whose factor of improvement is exactly 1 for every job compared."""
    return [n for n, f in foi.items() if f.get("jobs") and f.get("min") == f.get("max") == 1.0]


def identical_lines(foi: Mapping[str, Mapping[str, Any]], baseline: str) -> Sequence[str]:
    """One sentence per policy identical to ``baseline``, with the likely reason."""
    return [
        f"{n}: every job's JCT equals {baseline}'s (factor 1.000 throughout); likely "
        f"reason: {_LIKELY.get(n, _GENERIC)}."
        for n in identical_to_baseline(foi)
    ]
