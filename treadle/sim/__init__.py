"""The discrete-event simulator: the real RM, NM and AM cores driven by a virtual clock
(``treadle.sim.engine``)."""

from treadle.model import ProgressFn
from treadle.sim.engine import SimResult, Simulation
from treadle.sim.records import canonical_order

__all__ = ["ProgressFn", "SimResult", "Simulation", "canonical_order"]
