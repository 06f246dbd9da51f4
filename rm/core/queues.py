"""The queue hierarchy and the users as the RM sees them (QueueView and UserView for
policies): each with the book of what its applications hold."""

from __future__ import annotations

from treadle.model import QueueSpec, UserSpec
from treadle.resources import Accumulator, Resources


class Queue:
    """A queue in the hierarchy (a QueueView for policies)."""

    __slots__ = (
        "_used",
        "abs_capacity",
        "abs_max_capacity",
        "budget",
        "capacity",
        "children",
        "max_capacity",
        "name",
        "parent",
        "path",
        "spec",
        "spending_rate",
        "weight",
    )

    path: str
    abs_capacity: float
    abs_max_capacity: float

    def __init__(self, spec: QueueSpec, parent: Queue | None, capacity: float) -> None:
        self.name = spec.name
        self.parent = parent
        self.path = f"{parent.path}.{spec.name}" if parent else spec.name
        self.weight = spec.weight
        self.capacity = capacity
        self.max_capacity = spec.max_capacity / 100.0
        self.abs_capacity = capacity * (parent.abs_capacity if parent else 1.0)
        self.abs_max_capacity = self.max_capacity * (parent.abs_max_capacity if parent else 1.0)
        self._used = Accumulator()
        self.children: list[Queue] = []
        #: A budget account's initial values (Dynamic Priority), if the workload sets them.
        self.budget: float | None = getattr(spec, "budget", None)
        self.spending_rate: float | None = getattr(spec, "spending_rate", None)
        #: The queue as configured (a policy reads its scheduler properties there: fair's
        #: limits, capacity's leaf limits).
        self.spec = spec

    @property
    def used(self) -> Resources:
        return self._used.value

    @property
    def is_leaf(self) -> bool:
        return not self.children


class User:
    __slots__ = ("_used", "budget", "name", "weight")

    def __init__(self, spec: UserSpec) -> None:
        self.name = spec.name
        self.weight = spec.weight
        self.budget = spec.budget
        self._used = Accumulator()

    @property
    def used(self) -> Resources:
        return self._used.value


def build_queues(root: QueueSpec) -> dict[str, Queue]:
    """Flatten the queue tree. Children without a capacity split what their siblings leave."""
    out: dict[str, Queue] = {}

    def add(spec: QueueSpec, parent: Queue | None, capacity: float) -> None:
        q = Queue(spec, parent, capacity)
        out[q.name] = q
        if parent is not None:
            parent.children.append(q)
        given = sum(c.capacity for c in spec.children if c.capacity is not None)
        unset = [c for c in spec.children if c.capacity is None]
        rest = max(0.0, 100.0 - given) / len(unset) if unset else 0.0
        for c in spec.children:
            add(c, q, (c.capacity if c.capacity is not None else rest) / 100.0)

    add(root, None, 1.0)
    return out
