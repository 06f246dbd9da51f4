"""What a core call leaves for its host to do, collected in one outbox and drained in
one place (``ResourceManager.take_effects``) after each call."""

from __future__ import annotations

from dataclasses import dataclass

from treadle.messages import Container


@dataclass(frozen=True, slots=True)
class Effects:
    #: AM containers just allocated: the host starts each on its NM with the AM's command
    #: line (YARN's AMLauncher).
    am_launches: tuple[Container, ...] = ()
    #: Nodes whose books changed outside their own heartbeat (containers to stop,
    #: resources freed): a host that lets idle nodes sleep should let them heartbeat soon.
    touched_nodes: tuple[str, ...] = ()


class Outbox:
    """Effects as they accumulate inside the core, and the core's own follow-ups: AM
    containers that ended (each fails its attempt once the call's other work is done,
    rather than re-entering the core from inside a heartbeat)."""

    __slots__ = ("am_exits", "am_launches", "touched")

    def __init__(self) -> None:
        self.am_launches: list[Container] = []
        self.touched: dict[str, None] = {}  # ordered set
        self.am_exits: list[tuple[str, str, bool]] = []  # (app id, reason, counts)

    def take(self) -> Effects:
        out = Effects(tuple(self.am_launches), tuple(self.touched))
        self.am_launches.clear()
        self.touched.clear()
        return out
