"""Every policy on demo, dags and the SLS/Rumen samples produces exactly the event log,
per-job finishes and summary it produced when the digests were stored
(``python -m tests.golden --write`` after a change of results made on purpose)."""

from __future__ import annotations

import pytest

from tests.golden import WORKLOADS, available, digest, stored
from treadle.registry import discover

GOLDEN = stored()
CASES = [(wl, p) for wl in WORKLOADS for p in GOLDEN.get(wl, {})]


def test_every_installed_policy_has_golden_digests() -> None:
    for wl in available():
        assert sorted(GOLDEN[wl]) == sorted(discover("policies")), wl


@pytest.mark.parametrize(("workload", "policy"), CASES, ids=[f"{w}-{p}" for w, p in CASES])
def test_run_matches_its_golden_digests(workload: str, policy: str) -> None:
    if workload not in set(available()):
        pytest.skip(f"{WORKLOADS[workload]} is absent (../shared is not beside the checkout)")
    assert digest(workload, policy) == GOLDEN[workload][policy]
