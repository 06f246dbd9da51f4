"""treadle's pytest plugin (``pytest11`` entry point ``treadle``): the ``treadle_sim`` and
``treadle_cluster`` fixtures (docs/testing-against-treadle.md).

Every pytest session where treadle is installed imports this module, so it imports only
pytest and the standard library; the simulator and the cluster come in with the fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from treadle.testing.cluster import ClusterFactory
    from treadle.testing.results import Results


@pytest.fixture
def treadle_sim() -> Callable[..., Results]:
    """``treadle_sim(workload, policy="fifo", params=None, *, out_dir=None, **options)``:
    the simulator's run, as ``treadle.testing.sim.simulate``."""
    from treadle.testing.sim import simulate

    return simulate


@pytest.fixture
def treadle_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFactory]:
    """``treadle_cluster(workload, policy="fifo", params=None, *, nodes=None, dilation=10.0,
    secure=True)``: a started live local cluster (``treadle.testing.cluster.LiveCluster``),
    as many as the test asks for; every process they started is stopped after the test,
    whatever its outcome."""
    from treadle.testing.cluster import ClusterFactory

    factory = ClusterFactory(tmp_path_factory.mktemp("treadle-cluster"))
    try:
        yield factory
    finally:
        factory.close()
